"""``/docs``: Swagger UI over ``/openapi.json``, served from this server with no other origin.

Swagger UI's files come from the PyPI package ``swagger-ui-bundle-v2`` (Apache-2.0), installed with memlane:
nothing is downloaded at run time, so the page works on a machine with no network, under a CSP that allows
only this server. The page and its start-up script are memlane's own (the package's sample page points at a
petstore on the web). FastAPI's own ``/docs`` and ``/redoc`` load their files from a CDN and are turned off.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.responses import FileResponse
from starlette.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

from memlane.interfaces.http.csp import content_security_policy

DOCS_PATH = "/docs"
HERE = Path(__file__).parent
# Swagger UI sets inline style attributes; everything else is the server's own, as for the console.
DOCS_CONTENT_SECURITY_POLICY = content_security_policy(style_src="'self' 'unsafe-inline'")


def mount_api_docs(app: FastAPI) -> None:
    """Serve ``/docs`` (the page), ``/docs/init.js`` and ``/docs/assets/`` (Swagger UI's files)."""

    @app.get(DOCS_PATH, include_in_schema=False)
    def docs_page() -> FileResponse:
        return FileResponse(HERE / "index.html", media_type="text/html; charset=utf-8")

    @app.get(DOCS_PATH + "/init.js", include_in_schema=False)
    def docs_init() -> FileResponse:
        return FileResponse(HERE / "init.js", media_type="text/javascript; charset=utf-8")

    app.mount(DOCS_PATH + "/assets", StaticFiles(directory=str(swagger_ui_path)), name="docs-assets")
