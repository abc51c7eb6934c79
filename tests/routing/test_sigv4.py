"""SigV4 against AWS's published example (IAM ListUsers, 2015-08-30) and the event-stream framing."""

from datetime import datetime

import pytest

from routing.providers.bedrock import eventstream, sigv4

SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"


def test_signing_key_matches_the_aws_example():
    key = sigv4.signing_key(SECRET, "20150830", "us-east-1", "iam")
    assert key.hex() == "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9"


def test_signature_matches_the_aws_example():
    headers = sigv4.sign(
        method="GET",
        url="https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08",
        headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"},
        body=b"",
        access_key="AKIDEXAMPLE",
        secret_key=SECRET,
        region="us-east-1",
        service="iam",
        now=datetime(2015, 8, 30, 12, 36, 0),
    )
    assert headers["X-Amz-Date"] == "20150830T123600Z"
    assert headers["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, "
        "SignedHeaders=content-type;host;x-amz-date, "
        "Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
    )


def test_event_stream_round_trip_and_checksums():
    frames = eventstream.event(
        "contentBlockDelta", {"delta": {"text": "Hi"}, "contentBlockIndex": 0}
    ) + eventstream.exception("throttlingException", "Too many requests")
    messages = list(eventstream.decode_event_stream([frames[i : i + 5] for i in range(0, len(frames), 5)]))
    assert [(m.event_type, m.is_exception, m.payload) for m in messages] == [
        ("contentBlockDelta", False, {"delta": {"text": "Hi"}, "contentBlockIndex": 0}),
        ("throttlingException", True, {"message": "Too many requests"}),
    ]
    corrupted = bytearray(frames)
    corrupted[20] ^= 0xFF
    with pytest.raises(eventstream.FramingError):
        list(eventstream.decode_event_stream([bytes(corrupted)]))
