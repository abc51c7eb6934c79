"""Test URLconf: the real routes plus views that fail unexpectedly, to check the 500 envelope."""

from django.urls import path
from rest_framework.views import APIView

from gateway.urls import urlpatterns as real_urlpatterns


class BoomApi(APIView):
    def get(self, request):
        raise RuntimeError("secret-internal-detail")


def plain_boom(request):
    raise RuntimeError("secret-internal-detail")


urlpatterns = [
    path("api/v1/boom", BoomApi.as_view()),
    path("api/v1/plain-boom", plain_boom),
    *real_urlpatterns,
]
handler500 = "gateway.errors.handler500"
handler404 = "gateway.errors.handler404"
