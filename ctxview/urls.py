from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from ctxview import api, views
from ingest import receiver

urlpatterns = [
    path("v1/traces", receiver.receive_traces, name="cv-otlp-traces"),
    path("v1/logs", receiver.receive_logs, name="cv-otlp-logs"),
    path("api/v1/openapi.json", api.openapi, name="cv-api-openapi"),
    path("api/v1/runs", api.runs, name="cv-api-runs"),
    path("api/v1/runs/<int:run_id>", api.run_detail, name="cv-api-run"),
    path("api/v1/runs/<int:run_id>/calls", api.run_calls, name="cv-api-run-calls"),
    path("api/v1/runs/<int:run_id>/findings", api.run_findings, name="cv-api-run-findings"),
    path("api/v1/runs/<int:run_id>/items/<path:item_id>", api.item_lifecycle, name="cv-api-item"),
    path("api/v1/calls/<int:call_id>", api.call_detail, name="cv-api-call"),
    path("api/v1/traces/<str:trace_id>", api.trace_spans, name="cv-api-trace"),
    path("login/", auth_views.LoginView.as_view(), name="cv-login"),
    path("logout/", auth_views.LogoutView.as_view(), name="cv-logout"),
    path("", views.projects, name="cv-projects"),
    path("projects/new", views.create_project, name="cv-project-create"),
    path("projects/<slug:slug>/", views.project, name="cv-project"),
    path("projects/<slug:slug>/keys", views.create_ingest_key, name="cv-key-create"),
    path("projects/<slug:slug>/keys/<str:key_id>/revoke", views.revoke_ingest_key, name="cv-key-revoke"),
    path("projects/<slug:slug>/runs/", views.runs, name="cv-runs"),
    path("runs/<int:run_id>/", views.run, name="cv-run"),
    path("calls/<int:call_id>/", views.call, name="cv-call"),
    path("admin/", admin.site.urls),
]
