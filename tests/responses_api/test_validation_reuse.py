"""The request serializer lends built field trees to one validation at a time: validations running at once in
threads, valid and invalid mixed, each get their own answer."""

from concurrent.futures import ThreadPoolExecutor

from responses_api.validation.request import ResponseCreateRequestSerializer

VALID = {"model": "a/b", "input": "Hi", "provider": {"sort": "price"}, "temperature": 0.5}
INVALID = {"model": "a/b", "input": "Hi", "provider": {"sort": "fastest-ever"}, "temperature": "hot"}


def validate(n: int) -> tuple[int, bool, dict]:
    serializer = ResponseCreateRequestSerializer(data=VALID if n % 2 else INVALID)
    return n, serializer.is_valid(), serializer.errors if not n % 2 else serializer.validated_data


def test_validations_at_once_keep_their_own_results():
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(validate, range(400)))
    for n, ok, outcome in results:
        if n % 2:
            assert ok and outcome["temperature"] == 0.5 and outcome["provider"]["sort"]["by"] == "price"
        else:
            assert not ok and set(outcome) == {"provider", "temperature"}
    assert len(ResponseCreateRequestSerializer._spare_trees[ResponseCreateRequestSerializer]) <= 16
