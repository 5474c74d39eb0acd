"""Swagger UI (``/docs``) and ReDoc (``/redoc``) work without internet, against a real
server: every script, stylesheet and icon the pages load is served by franz itself
(``api.docs``), with the right content type; and, where Debian's chromium is
installed, the rendered ``/docs`` page shows the operations of ``/openapi.json``."""

from __future__ import annotations

import re
import shutil
import subprocess

import httpx
import pytest

_ASSET = re.compile(r'<(?:script|link)\b[^>]*?\b(?:src|href)="([^"]+)"', re.IGNORECASE)
_TYPES = {".js": "text/javascript", ".css": "text/css", ".png": "image/png"}


def _asset_urls(html: str) -> list[str]:
    return _ASSET.findall(html)


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_page_loads_only_local_assets(client: httpx.Client, page: str) -> None:
    r = client.get(page)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/html")
    urls = _asset_urls(r.text)
    assert any(u.endswith(".js") for u in urls), urls  # the UI bundle itself
    assert all(u.startswith("/") and not u.startswith("//") for u in urls), urls
    assert "http://" not in r.text and "https://" not in r.text, r.text  # no CDN, no fonts
    for url in urls:
        asset = client.get(url)
        assert asset.status_code == 200, url
        suffix = url[url.rfind("."):]
        assert asset.headers["content-type"].split(";")[0] == _TYPES[suffix], url
        assert len(asset.content) > 1000, url


def test_docs_point_at_the_openapi_document(client: httpx.Client) -> None:
    assert "'/openapi.json'" in client.get("/docs").text
    assert 'spec-url="/openapi.json"' in client.get("/redoc").text
    assert client.get("/docs/oauth2-redirect").status_code == 200


def test_docs_pages_are_not_api_operations(client: httpx.Client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert not {"/docs", "/redoc"} & paths.keys()
    assert not any(p.startswith("/docs-assets") for p in paths)


needs_chromium = pytest.mark.skipif(
    shutil.which("chromium") is None,
    reason="Debian's chromium is not installed (apt-get install chromium)")


def _operation_ids(client: httpx.Client) -> set[str]:
    spec = client.get("/openapi.json").json()
    return {op["operationId"] for item in spec["paths"].values()
            for op in item.values() if isinstance(op, dict) and "operationId" in op}


def _rendered_dom(url: str, budget_ms: int) -> str:
    """The page's DOM after headless Chromium ran its scripts for ``budget_ms``."""
    cmd = ["chromium", "--headless", "--no-sandbox", "--disable-gpu",
           "--disable-background-networking", f"--virtual-time-budget={budget_ms}",
           "--dump-dom", url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=True).stdout


@needs_chromium
def test_swagger_ui_renders_the_operations_headless(client: httpx.Client, franz_url: str) -> None:
    operation_ids = _operation_ids(client)
    dom = _rendered_dom(franz_url + "/docs", 15000)
    assert 'class="swagger-ui' in dom, dom[:2000]
    # rendered operations carry their path (opblock-summary-path) and their operationId
    assert "/v3/clusters/{cluster_id}/topics" in dom, dom[:2000]
    assert any(op_id in dom for op_id in operation_ids), dom[:2000]


@needs_chromium
def test_redoc_renders_every_operation_headless(client: httpx.Client, franz_url: str) -> None:
    operation_ids = _operation_ids(client)
    dom = _rendered_dom(franz_url + "/redoc", 20000)
    # ReDoc gives each rendered operation a section named after its operationId
    rendered = set(re.findall(r'data-section-id="operation/([A-Za-z0-9_]+)"', dom))
    assert rendered, dom[:2000]
    assert operation_ids <= rendered, sorted(operation_ids - rendered)[:10]
