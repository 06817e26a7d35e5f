from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from ctxview import api, review_api, views, views_call, views_review, views_run
from ingest import receiver

urlpatterns = [
    path("v1/traces", receiver.receive_traces, name="cv-otlp-traces"),
    path("v1/logs", receiver.receive_logs, name="cv-otlp-logs"),
    path("api/v1/openapi.json", api.openapi, name="cv-api-openapi"),
    path("api/v1/runs", api.runs, name="cv-api-runs"),
    path("api/v1/runs/<int:run_id>", review_api.run_resource, name="cv-api-run"),
    path("api/v1/runs/<int:run_id>/calls", api.run_calls, name="cv-api-run-calls"),
    path("api/v1/runs/<int:run_id>/findings", api.run_findings, name="cv-api-run-findings"),
    path("api/v1/runs/<int:run_id>/items/<path:item_id>", api.item_lifecycle, name="cv-api-item"),
    path("api/v1/calls/<int:call_id>", api.call_detail, name="cv-api-call"),
    path("api/v1/traces/<str:trace_id>", api.trace_spans, name="cv-api-trace"),
    path("api/v1/runs/<int:run_id>/notes", review_api.run_notes, name="cv-api-run-notes"),
    path("api/v1/notes/<int:note_id>", review_api.note_detail, name="cv-api-note"),
    path("api/v1/runs/<int:run_id>/labels", review_api.run_labels, name="cv-api-run-labels"),
    path("api/v1/runs/<int:run_id>/labels/<str:name>", review_api.run_label, name="cv-api-run-label"),
    path("api/v1/calls/<int:call_id>/bookmark", review_api.call_bookmark, name="cv-api-call-bookmark"),
    path("api/v1/runs/<int:run_id>/export", review_api.run_export, name="cv-api-run-export"),
    path("api/v1/runs/<int:run_id>/calls.csv", review_api.run_calls_csv, name="cv-api-run-csv"),
    path("api/v1/projects/<slug:slug>/import", review_api.project_import, name="cv-api-project-import"),
    path("api/v1/projects/<slug:slug>/policy", review_api.project_policy, name="cv-api-project-policy"),
    path("api/v1/projects/<slug:slug>/prices", review_api.project_prices, name="cv-api-project-prices"),
    path("login/", auth_views.LoginView.as_view(), name="cv-login"),
    path("logout/", auth_views.LogoutView.as_view(), name="cv-logout"),
    path("", views.projects, name="cv-projects"),
    path("projects/new", views.create_project, name="cv-project-create"),
    path("projects/<slug:slug>/", views.project, name="cv-project"),
    path("projects/<slug:slug>/keys", views.create_ingest_key, name="cv-key-create"),
    path("projects/<slug:slug>/keys/<str:key_id>/revoke", views.revoke_ingest_key, name="cv-key-revoke"),
    path("projects/<slug:slug>/runs/", views.runs, name="cv-runs"),
    path("runs/<int:run_id>/", views_run.run, name="cv-run"),
    path("runs/<int:run_id>/live", views_run.run_live, name="cv-run-live"),
    path("runs/<int:run_id>/panels/<slug:slug>", views_run.run_panel, name="cv-run-panel"),
    path("runs/<int:run_id>/explain", views_run.explain_turn, name="cv-explain"),
    path("runs/<int:run_id>/compare", views_run.compare_calls, name="cv-compare"),
    path("runs/<int:run_id>/compare/item", views_run.compare_item, name="cv-compare-item"),
    path("runs/<int:run_id>/item", views_run.item_page, name="cv-item"),
    path("calls/<int:call_id>/", views_call.call, name="cv-call"),
    path("runs/<int:run_id>/review", views_review.run_review, name="cv-run-review"),
    path("projects/<slug:slug>/settings", views_review.project_settings, name="cv-project-settings"),
    path("calls/<int:call_id>/content", views_call.call_content, name="cv-call-content"),
    path("admin/", admin.site.urls),
]
