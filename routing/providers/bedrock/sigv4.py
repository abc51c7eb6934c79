"""AWS Signature Version 4 for Bedrock requests signed with an access key pair (pure: the time is passed in).
https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html"""

import hashlib
import hmac
from datetime import datetime
from urllib.parse import quote, urlsplit

ALGORITHM = "AWS4-HMAC-SHA256"


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode(), hashlib.sha256).digest()


def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    key = _hmac(("AWS4" + secret).encode(), date)
    key = _hmac(key, region)
    key = _hmac(key, service)
    return _hmac(key, "aws4_request")


def canonical_query(query: str) -> str:
    pairs = []
    for part in filter(None, query.split("&")):
        name, _, value = part.partition("=")
        pairs.append((quote(name, safe="-_.~"), quote(value, safe="-_.~")))
    return "&".join(f"{n}={v}" for n, v in sorted(pairs))


def sign(
    *,
    method: str,
    url: str,
    headers: dict[str, str],
    body: bytes,
    access_key: str,
    secret_key: str,
    region: str,
    service: str,
    now: datetime,
) -> dict[str, str]:
    """The headers to add (X-Amz-Date, Authorization). `headers` must hold every header to be signed."""
    parts = urlsplit(url)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    date = amz_date[:8]
    signed = {
        k.lower(): " ".join(v.split()) for k, v in {**headers, "host": parts.netloc, "x-amz-date": amz_date}.items()
    }
    names = sorted(signed)
    # The path is URI-encoded once more for every service but S3.
    path = quote(quote(parts.path or "/", safe="/-_.~"), safe="/-_.~")
    canonical_request = "\n".join(
        [
            method,
            path,
            canonical_query(parts.query),
            "".join(f"{n}:{signed[n]}\n" for n in names),
            ";".join(names),
            hashlib.sha256(body).hexdigest(),
        ]
    )
    scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = "\n".join([ALGORITHM, amz_date, scope, hashlib.sha256(canonical_request.encode()).hexdigest()])
    signature = hmac.new(signing_key(secret_key, date, region, service), to_sign.encode(), hashlib.sha256).hexdigest()
    return {
        "X-Amz-Date": amz_date,
        "Authorization": f"{ALGORITHM} Credential={access_key}/{scope}, SignedHeaders={';'.join(names)}, "
        f"Signature={signature}",
    }
