"""How the HTTP clients make a call: a :class:`Call` (method, path, body and how the answer is read), the
error a failed response becomes, and :class:`Sync` and :class:`Async`, which turn an endpoint of
:mod:`memlane.client.endpoints` into a method of :class:`memlane.client.Client` or
:class:`memlane.client.AsyncClient` that sends it on that client's transport."""

from __future__ import annotations

import builtins
import functools
import inspect
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar, overload

import httpx

from memlane.client.errors import APIError, error_from_response
from memlane.client.models import (
    page_from_json,
)
from memlane.core.model import Page

P = ParamSpec("P")


R = TypeVar("R")


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One request, and ``read``: its response made the method's value (or the API's error raised)."""

    method: str
    path: str
    read: Callable[[httpx.Response], T]
    json: Any = None
    params: Mapping[str, Any] | None = None


def auth_headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def error(response: httpx.Response) -> Exception:
    """The client error an unsuccessful response stands for (its ``error`` body, or the bare status)."""
    try:
        err = response.json()["error"]
        code, message, field = str(err["code"]), str(err["message"]), err.get("field")
    except (ValueError, KeyError, TypeError):
        return APIError(f"HTTP {response.status_code}: {response.text[:200]}", status=response.status_code)
    return error_from_response(response.status_code, code, message, field)


def checked(response: httpx.Response) -> httpx.Response:
    if response.is_success:
        return response
    raise error(response)


def call(
    method: str,
    path: str,
    parse: Callable[[Any], T],
    *,
    json: Any = None,
    params: Mapping[str, Any] | None = None,
) -> Call[T]:
    """A call whose successful response's JSON (None for 204) is read by ``parse``."""

    def read(response: httpx.Response) -> T:
        response = checked(response)
        return parse(None if response.status_code == 204 else response.json())

    return Call(method, path, read, json, params)


def each_of(parse: Callable[[Any], T]) -> Callable[[Any], builtins.list[T]]:
    return lambda items: [parse(x) for x in items]


def page_of(parse: Callable[[Mapping[str, Any]], T]) -> Callable[[Any], Page[T]]:
    return lambda body: page_from_json(body, parse)


def field_of(name: str, kind: Callable[[Any], T]) -> Callable[[Any], T]:
    return lambda body: kind(body[name])


def no_body(body: Any) -> None:
    return None


class SyncTransport(Protocol):
    def _perform(self, call: Call[T]) -> T: ...


class AsyncTransport(Protocol):
    async def _perform(self, call: Call[T]) -> T: ...


def _method(endpoint: Callable[..., Call[Any]], run: Callable[..., Any]) -> None:
    """Give ``run`` (a client's method) the endpoint's docstring and parameters, with ``self`` and the value
    the call reads, as a method written out would have (``help()``, ``inspect.signature``)."""
    functools.update_wrapper(run, endpoint)
    signature = inspect.signature(endpoint)
    returns = signature.return_annotation
    if isinstance(returns, str) and returns.startswith("Call[") and returns.endswith("]"):
        returns = returns.removeprefix("Call[").removesuffix("]")
    this = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    run.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[this, *signature.parameters.values()], return_annotation=returns
    )
    run.__annotations__ = {**endpoint.__annotations__, "return": returns}


class _Endpoint:
    def __init__(self, endpoint: Callable[..., Call[Any]], run: Callable[..., Any]) -> None:
        _method(endpoint, run)
        self.function = run
        # vars(Client) shows this object: the same name, docstring and signature as the method.
        self.__dict__.update(run.__dict__, __doc__=run.__doc__, __wrapped__=run)

    def __set_name__(self, owner: type, name: str) -> None:
        # The endpoint's name may differ (``list = Sync(endpoints.list_blocks)``): the method's is this one.
        qualname = f"{owner.__qualname__}.{name}"
        self.function.__name__, self.function.__qualname__ = name, qualname
        self.__dict__.update(__name__=name, __qualname__=qualname)


class Sync(_Endpoint, Generic[P, R]):
    """``Client``'s method for an endpoint: it sends the call and returns what it reads."""

    def __init__(self, endpoint: Callable[P, Call[R]]) -> None:
        def run(client: SyncTransport, /, *args: P.args, **kwargs: P.kwargs) -> R:
            return client._perform(endpoint(*args, **kwargs))

        super().__init__(endpoint, run)

    def __call__(self, client: SyncTransport, /, *args: P.args, **kwargs: P.kwargs) -> R:
        result: R = self.function(client, *args, **kwargs)
        return result

    @overload
    def __get__(self, obj: None, owner: type) -> Callable[Concatenate[Any, P], R]: ...

    @overload
    def __get__(self, obj: SyncTransport, owner: type) -> Callable[P, R]: ...

    def __get__(self, obj: SyncTransport | None, owner: type) -> Callable[..., R]:
        bound: Callable[..., R] = self.function if obj is None else self.function.__get__(obj, owner)
        return bound


class Async(_Endpoint, Generic[P, R]):
    """``AsyncClient``'s method for an endpoint: a coroutine that sends the call and returns what it reads."""

    def __init__(self, endpoint: Callable[P, Call[R]]) -> None:
        async def run(client: AsyncTransport, /, *args: P.args, **kwargs: P.kwargs) -> R:
            return await client._perform(endpoint(*args, **kwargs))

        super().__init__(endpoint, run)

    async def __call__(self, client: AsyncTransport, /, *args: P.args, **kwargs: P.kwargs) -> R:
        result: R = await self.function(client, *args, **kwargs)
        return result

    @overload
    def __get__(self, obj: None, owner: type) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]: ...

    @overload
    def __get__(self, obj: AsyncTransport, owner: type) -> Callable[P, Coroutine[Any, Any, R]]: ...

    def __get__(self, obj: AsyncTransport | None, owner: type) -> Callable[..., Coroutine[Any, Any, R]]:
        bound: Callable[..., Coroutine[Any, Any, R]] = (
            self.function if obj is None else self.function.__get__(obj, owner)
        )
        return bound
