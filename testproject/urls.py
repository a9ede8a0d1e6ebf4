from django.contrib import admin
from django.urls import path

import django_jobqueue.metrics
from testproject.shop import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("signup/", views.signup, name="signup"),
    # Prometheus metrics: for staff sessions, or a bearer of JOBQUEUE["METRICS_TOKEN"].
    path("metrics/", django_jobqueue.metrics.view, name="jobqueue-metrics"),
]
