"""Checks of our own for schemathesis (loaded with SCHEMATHESIS_HOOKS=hooks).

Every error the service answers — its own, the framework's, a limit's — is
JSON `{"detail": "<non-empty message>"}`.
"""

import json

import schemathesis


@schemathesis.check
def error_is_json_detail(ctx, response, case):
    if response.status_code < 400:
        return None
    content_type = response.headers.get("content-type", [""])
    if isinstance(content_type, list):
        content_type = content_type[0] if content_type else ""
    if not content_type.startswith("application/json"):
        raise AssertionError(
            f"{response.status_code} answered with content-type {content_type!r}, not JSON"
        )
    try:
        body = json.loads(response.content)
    except ValueError as error:
        raise AssertionError(f"{response.status_code} body is not JSON: {error}") from None
    detail = body.get("detail") if isinstance(body, dict) else None
    if not isinstance(detail, str) or not detail:
        raise AssertionError(f"{response.status_code} body has no detail: {body!r}")
    return None
