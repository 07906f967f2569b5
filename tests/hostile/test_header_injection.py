"""Line breaks smuggled into an HTTP provider's headers or method (header injection).

A header value or name, or a method, that ends in a line break could start a new
header or request line on the wire. The provider refuses each one where it is built,
naming the header and never echoing the value, so no request is ever made.
(A ``$`` in the checks' patterns once let a single trailing ``\\n`` through.)
"""

from __future__ import annotations

import pytest
from lionctx.providers import HttpContextProvider

SECRET = "hdr-s3cr3t-of-the-tenant"


@pytest.mark.parametrize("value", [f"Bearer {SECRET}\n", f"Bearer {SECRET}\r\n",
                                   f"Bearer {SECRET}\nX-Admin: 1", "\n"])
def test_a_header_value_with_a_line_break_is_refused_without_echo(value: str) -> None:
    with pytest.raises(ValueError) as info:
        HttpContextProvider("http://127.0.0.1:9/", headers={"Authorization": value})
    assert "Authorization" in str(info.value) and "printable ASCII" in str(info.value)
    assert SECRET not in str(info.value)


@pytest.mark.parametrize("name", ["X-Key\n", "X-Key\r\nX-Admin"])
def test_a_header_name_with_a_line_break_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="not a valid header name"):
        HttpContextProvider("http://127.0.0.1:9/", headers={name: "v"})


@pytest.mark.parametrize("method", ["GET\n", "GET\r\n", "GET /admin HTTP/1.1\n"])
def test_a_method_with_a_line_break_is_refused(method: str) -> None:
    with pytest.raises(ValueError, match="HTTP method name"):
        HttpContextProvider("http://127.0.0.1:9/", method=method)
