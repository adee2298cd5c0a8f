"""One POST to ``/chat/completions`` with transport retries, and a probe's one GET of ``/models``: the only
place httpx errors are seen."""

from __future__ import annotations

import logging
import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import httpx

from memlane.core.errors import LLMDeadlineError, LLMResponseError, LLMTransportError
from memlane.core.llm.backoff import Backoff, is_retryable_status, parse_retry_after
from memlane.core.llm.probe import (
    BAD_REPLY,
    HTTP_ERROR,
    MODELS_PATH,
    RATE_LIMITED,
    REFUSED,
    TIMEOUT,
    UNREACHABLE,
    LLMProbe,
)
from memlane.core.llm.settings import LLMSettings

log = logging.getLogger("memlane.llm")

EXCERPT_CHARS = 300
CHAT_PATH = "chat/completions"
# Refusals that say nothing of the request but of the service (the key, the model or the route is wrong):
# an outage for the jobs, which wait instead of using up their attempts.
_SERVICE_REFUSALS = frozenset({401, 403, 404, 407})
# Answers (after the retries) that speak of the service's state, not of the request: a rate limit, a
# request timeout, an overload, a gateway that cannot reach the model. Any other 5xx says the server
# failed on this request.
_BUSY = frozenset({408, 429, 502, 503, 504})
# Statuses with which servers refuse an unsupported ``response_format`` (llama.cpp answers 500, §3.5).
_FORMAT_REJECT_STATUS = frozenset({400, 422, 500})
_FORMAT_WORDS = re.compile(r"response_format|json", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ChatReply:
    """The assistant's text and the token usage the server reported for one exchange."""

    text: str
    tokens_in: int | None
    tokens_out: int | None


@dataclass(slots=True)
class Tally:
    """Running totals of one logical call across its attempts (kept even when the call fails)."""

    attempts: int = 0
    tokens_in: int | None = None
    tokens_out: int | None = None
    ignored_keys: int = 0  # properties of the reply that the schema forbids, dropped rather than refused

    def add_usage(self, tokens_in: int | None, tokens_out: int | None) -> None:
        """Add one exchange's usage; unreported counts stay ``None`` only if no exchange reported any."""
        if tokens_in is not None:
            self.tokens_in = (self.tokens_in or 0) + tokens_in
        if tokens_out is not None:
            self.tokens_out = (self.tokens_out or 0) + tokens_out


class ResponseFormatRejected(Exception):
    """The server refused the request's ``response_format``; the caller should ask without it."""


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[:EXCERPT_CHARS] + "…"


class ChatEndpoint:
    """Sends chat bodies to an OpenAI-compatible server, at most ``max_concurrency`` at a time.

    The semaphore is held for the HTTP exchange only, not while sleeping between retries, so a thread
    waiting out a 429 does not block the others.
    """

    def __init__(
        self,
        settings: LLMSettings,
        *,
        transport: httpx.BaseTransport | None,
        sleep: Callable[[float], None],
        rng: random.Random,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._url = settings.base_url.rstrip("/") + "/" + CHAT_PATH
        self._models_url = settings.base_url.rstrip("/") + "/" + MODELS_PATH
        self._timeout_s = settings.timeout_s
        self._max_retries = settings.max_retries
        self._backoff = Backoff(settings.backoff_base_s, settings.backoff_cap_s, settings.retry_after_cap_s)
        self._slots = threading.BoundedSemaphore(settings.max_concurrency)
        self._sleep = sleep
        self._rng = rng
        self._clock = clock
        self._http = httpx.Client(
            headers={"Authorization": f"Bearer {settings.api_key}"},
            timeout=httpx.Timeout(settings.timeout_s),
            transport=transport,
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def probe(self, model: str, timeout_s: float) -> LLMProbe:
        """``GET {base}/models`` once, within ``timeout_s``, outside the concurrency slots (a probe must answer
        while every slot waits on a slow server): whether the server is there, never a completion."""
        url = self._models_url
        start = time.perf_counter()

        def took() -> float:
            return round((time.perf_counter() - start) * 1000, 2)

        try:
            response = self._http.get(url, timeout=httpx.Timeout(timeout_s))
        except httpx.TimeoutException as exc:
            detail = f"no reply from {url} within {timeout_s:g} s ({type(exc).__name__})"
            return LLMProbe(False, TIMEOUT, took(), detail=detail)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            return LLMProbe(False, UNREACHABLE, took(), detail=f"{url}: {type(exc).__name__}: {exc}")
        latency, status = took(), response.status_code
        if not 200 <= status < 300:
            kind = RATE_LIMITED if status == 429 else REFUSED if status in (401, 403, 407) else HTTP_ERROR
            detail = f"HTTP {status} from {url}: {_excerpt(response.text)}"
            return LLMProbe(False, kind, latency, status, detail=detail)
        try:
            data = response.json()
        except ValueError:
            return LLMProbe(False, BAD_REPLY, latency, status, detail=f"{url} answered {status} with no JSON")
        listed = data.get("data") if isinstance(data, dict) else None
        if not isinstance(listed, list):
            return LLMProbe(True, None, latency, status, detail=f"{url} answered {status}")
        ids = {m.get("id") for m in listed if isinstance(m, dict)}
        return LLMProbe(True, None, latency, status, model in ids, f"{url} answered {status}: {len(ids)} models")

    def send(self, body: Mapping[str, object], tally: Tally, deadline: float | None = None) -> ChatReply:
        """POST ``body``, retrying 408/429/5xx, timeouts and connection errors with backoff; with a
        ``deadline`` (a :func:`time.monotonic` instant) every attempt's timeout, the wait for a slot and the
        backoff fit before it, and the retries stop when the next would not.

        Raises LLMTransportError (at once for other statuses, or when the retries or the time are spent),
        LLMResponseError when a 2xx reply is not a chat completion, and ResponseFormatRejected.
        """
        last_error = ""
        last_status: int | None = None  # of the last answer, None when none came
        sent = False  # whether the last attempt's request reached the server
        retry_after: float | None = None
        for attempt in range(self._max_retries + 1):
            if attempt:
                delay = self._backoff.delay(attempt - 1, self._rng, retry_after)
                if deadline is not None and time.monotonic() + delay >= deadline:
                    raise LLMDeadlineError(
                        f"gave up on {self._url} after {attempt} attempts: the deadline leaves no time for the "
                        f"next (in {delay:.1f} s); last error: {last_error}"
                    )
                log.warning("LLM server: %s; retry %d of %d in %.1f s", last_error, attempt, self._max_retries, delay)
                self._sleep(delay)
            retry_after = None
            timeout_s = self._timeout_s if deadline is None else min(self._timeout_s, deadline - time.monotonic())
            if timeout_s <= 0 or not self._slots.acquire(timeout=None if deadline is None else timeout_s):
                raise LLMDeadlineError(
                    f"no reply from {self._url} before the deadline ({attempt} attempts); last error: "
                    f"{last_error or 'none: every request slot was busy'}"
                )
            tally.attempts += 1
            try:
                # A timeout is per phase (connect, write, each read): a reply whose body trickles in may
                # overrun it, which a chat completion's one JSON body does not.
                response = self._http.post(self._url, json=dict(body), timeout=httpx.Timeout(timeout_s))
            except httpx.TimeoutException as exc:
                last_error = f"no reply within {timeout_s:.3g} s ({type(exc).__name__})"
                last_status, sent = None, not isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout)
                continue
            except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
                last_error = f"connection failed ({type(exc).__name__}: {exc})"
                last_status, sent = None, not isinstance(exc, httpx.ConnectError)
                continue
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                raise LLMTransportError(f"request to {self._url} failed: {type(exc).__name__}: {exc}") from exc
            finally:
                self._slots.release()
            status = response.status_code
            if 200 <= status < 300:
                return self._read(response, tally)
            excerpt = _excerpt(response.text)
            if "response_format" in body and status in _FORMAT_REJECT_STATUS and _FORMAT_WORDS.search(excerpt):
                raise ResponseFormatRejected(f"HTTP {status}: {excerpt}")
            if not is_retryable_status(status):
                outage = status in _SERVICE_REFUSALS
                raise LLMTransportError(f"HTTP {status} from {self._url}: {excerpt}", outage=outage)
            last_error = f"HTTP {status}: {excerpt}"
            last_status, sent = status, True
            retry_after = parse_retry_after(response.headers.get("retry-after"), self._clock())
        if deadline is not None and time.monotonic() >= deadline:
            raise LLMDeadlineError(f"no reply from {self._url} before the deadline; last error: {last_error}")
        failed_here = last_status is not None and last_status not in _BUSY
        raise LLMTransportError(
            f"gave up on {self._url} after {self._max_retries + 1} attempts; last error: {last_error}",
            outage=not failed_here,
            could_be_the_request=sent and not failed_here,
        )

    @staticmethod
    def _read(response: httpx.Response, tally: Tally) -> ChatReply:
        try:
            data = response.json()
        except ValueError:
            raise LLMResponseError("server reply is not JSON", raw=response.text) from None
        usage = data.get("usage") if isinstance(data, dict) else None
        usage = usage if isinstance(usage, dict) else {}
        tokens_in, tokens_out = usage.get("prompt_tokens"), usage.get("completion_tokens")
        reply = ChatReply(
            text="",
            tokens_in=tokens_in if isinstance(tokens_in, int) else None,
            tokens_out=tokens_out if isinstance(tokens_out, int) else None,
        )
        tally.add_usage(reply.tokens_in, reply.tokens_out)
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise LLMResponseError("server reply has no choices[0].message.content", raw=response.text) from None
        if not isinstance(content, str):
            raise LLMResponseError("server reply has no text content", raw=response.text)
        return ChatReply(content, reply.tokens_in, reply.tokens_out)
