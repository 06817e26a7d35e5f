"""Security headers for every response: a strict Content-Security-Policy and a few others.

No inline scripts anywhere (pages load JS from /static/ and pass data with json_script). Styles allow
'unsafe-inline' because plotly.js adds its own style rules at run time (plotly/plotly.js#2355); plotly's
basic traces need no eval, so scripts stay 'self' only.
"""

from django.conf import settings

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
PERMISSIONS_POLICY = "camera=(), microphone=(), geolocation=(), payment=(), usb=()"


class SecurityHeadersMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response
        self.policy = getattr(settings, "CTXVIEW_CONTENT_SECURITY_POLICY", CONTENT_SECURITY_POLICY)

    def __call__(self, request):
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", self.policy)
        response.headers.setdefault("Permissions-Policy", PERMISSIONS_POLICY)
        return response
