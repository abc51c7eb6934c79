"""Sticky sessions hold across two gateway instances (two gunicorn masters, two workers each) that share
Redis: a session keeps going to the same provider endpoint, and moves on when that endpoint fails."""

from decimal import Decimal

import pytest
import redis as redis_client
import requests

from gateway.billing.models import Generation
from gateway.billing.provisioning import account_provision
from routing.models import Endpoint
from tests.live import LiveGateway
from tests.support import Persona, point

pytestmark = pytest.mark.live
REDIS_URL = "redis://127.0.0.1:6379/3"


@pytest.fixture
def shared_redis():
    try:
        connection = redis_client.Redis.from_url(REDIS_URL, socket_connect_timeout=1)
        connection.flushdb()
    except redis_client.RedisError:
        pytest.skip("needs the local Redis on 127.0.0.1:6379")
    yield
    connection.flushdb()


def test_session_sticks_across_instances_sharing_redis(transactional_db, multi, shared_redis):
    # Given four equally priced endpoints, so load balancing alone would spread a session over them
    for endpoint in Endpoint.objects.filter(model_id="multi/model"):
        endpoint.price_prompt = endpoint.price_completion = Decimal(1)
        endpoint.save()
    frank = Persona(account_provision(name="frank", plan="payg", credits=Decimal("5")))
    instances = [LiveGateway(workers=2, threads=4, extra_env={"REDIS_URL": REDIS_URL}) for _ in range(2)]
    try:

        def send(index: int) -> Generation:
            response = requests.post(
                f"{instances[index % 2].api}/responses",
                timeout=20,
                headers={"Authorization": f"Bearer {frank.api_key}"},
                json={"model": "multi/model", "input": "Hi", "session_id": "conv-9"},
            )
            assert response.status_code == 200, response.text
            return Generation.objects.get(pk=response.headers["X-Generation-Id"])

        # When one session's requests alternate between the two instances
        served = [send(i).provider for i in range(10)]
        # Then they all went to one endpoint
        assert len(set(served)) == 1, served
        # And when that endpoint fails, the session falls back and sticks to the new one
        point(multi, served[0], "status=500")
        after = [send(i) for i in range(6)]
        assert after[0].provider != served[0]
        assert {g.provider for g in after[1:]} == {after[0].provider}
        other = requests.post(
            f"{instances[0].api}/responses",
            timeout=20,
            headers={"Authorization": f"Bearer {frank.api_key}"},
            json={"model": "multi/model", "input": "Hi"},
        )
        assert other.status_code == 200
    finally:
        for instance in instances:
            instance.stop()
