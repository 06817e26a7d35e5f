"""Security headers for every response (a strict Content-Security-Policy and a few others), and the one
check every text input goes through before a view sees it.

No inline scripts anywhere (pages load JS from /static/ and pass data with json_script). Styles allow
'unsafe-inline' because plotly.js adds its own style rules at run time (plotly/plotly.js#2355); plotly's
basic traces need no eval, so scripts stay 'self' only.
"""

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from ctxview.untrusted import first_text_problem
from ctxview.views_common import bad_request

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


_FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")


class UntrustedInputMiddleware:
    """A 400 for a path, query parameter or form field PostgreSQL cannot store (NUL, a lone surrogate).

    One place instead of a check in every view: without it each such value reached the database and came
    back as a 500. JSON bodies are checked where they are parsed (review_api.json_body), with the same rule.
    The OTLP receiver (/v1/) cleans what it decodes itself.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path_info.startswith("/v1/"):
            problem = first_text_problem([("the path", request.path_info)])
            problem = problem or first_text_problem(request.GET.items())
            if problem is None and request.method == "POST" and request.content_type in _FORMS:
                problem = first_text_problem(request.POST.items())
            if problem:
                return self._refuse(request, problem)
        return self.get_response(request)

    @staticmethod
    def _refuse(request: HttpRequest, problem: str) -> HttpResponse:
        message = f"{problem}: such text cannot be stored or searched"
        if request.path_info.startswith("/api/"):
            return JsonResponse({"error": message}, status=400)
        return bad_request(request, message)
