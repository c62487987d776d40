"""/docs (Swagger UI) and /redoc served from files this host has: no CDN, so the API's docs
work on a host without internet access.

The assets come from the fastapi-offline package's static directory (Swagger UI's bundle and
CSS, ReDoc's standalone build); only its files are used, the app stays a plain FastAPI.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/static/docs"
# The browser may load nothing from elsewhere: ReDoc's sidebar links its logo from a CDN,
# which this blocks (the page works without it). Inline scripts: FastAPI's bootstrap code.
CSP = ("default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
       "img-src 'self' data:; worker-src 'self' blob:; font-src 'self' data:")


def _local_only(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = CSP
    return page


def assets_dir() -> str:
    return str(files("fastapi_offline") / "static")


def include(app: FastAPI) -> None:
    """Add /docs, /docs/oauth2-redirect, /redoc and their assets under /static/docs. The app
    must be created with docs_url=None and redoc_url=None (FastAPI's own pages use a CDN)."""
    openapi_url = app.openapi_url or "/openapi.json"
    title = f"{app.title} API"
    app.mount(ASSETS, StaticFiles(directory=assets_dir()), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return _local_only(get_swagger_ui_html(
            openapi_url=openapi_url, title=title, oauth2_redirect_url="/docs/oauth2-redirect",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js", swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon.png",
        ))

    @app.get("/docs/oauth2-redirect", include_in_schema=False)
    def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return _local_only(get_redoc_html(openapi_url=openapi_url, title=title,
                                          redoc_js_url=f"{ASSETS}/redoc.standalone.js",
                                          redoc_favicon_url=f"{ASSETS}/favicon.png", with_google_fonts=False))
