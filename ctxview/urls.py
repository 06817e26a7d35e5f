from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from ctxview import api, views
from ingest import receiver

urlpatterns = [
    path("v1/traces", receiver.receive_traces, name="cv-otlp-traces"),
    path("v1/logs", receiver.receive_logs, name="cv-otlp-logs"),
    path("api/v1/traces/<str:trace_id>", api.trace_spans, name="cv-api-trace"),
    path("login/", auth_views.LoginView.as_view(), name="cv-login"),
    path("logout/", auth_views.LogoutView.as_view(), name="cv-logout"),
    path("", views.projects, name="cv-projects"),
    path("projects/new", views.create_project, name="cv-project-create"),
    path("projects/<slug:slug>/", views.project, name="cv-project"),
    path("projects/<slug:slug>/keys", views.create_ingest_key, name="cv-key-create"),
    path("projects/<slug:slug>/keys/<str:key_id>/revoke", views.revoke_ingest_key, name="cv-key-revoke"),
    path("admin/", admin.site.urls),
]
