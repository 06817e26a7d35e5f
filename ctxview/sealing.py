"""Secrets the server must use again (a re-ask endpoint's key) are stored sealed, never as given.

Fernet (AES-128-CBC with HMAC-SHA256, from ``cryptography``) under a key derived with HKDF from
``CTXVIEW_ENCRYPTION_KEY`` (or ``CTXVIEW_ENCRYPTION_KEY_FILE``), else from the secret key: a copy of the
database alone does not give the keys away. A sealed value that no longer opens (the key was changed)
reads as unreadable, and the page asks for the secret again.
"""

import base64
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

PREFIX = "fernet:v1:"


class Unreadable(ValueError):
    """A sealed value that the current key cannot open."""


@lru_cache(maxsize=4)
def _fernet(secret: str) -> Fernet:
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"ctxview sealed secrets v1").derive(
        secret.encode()
    )
    return Fernet(base64.urlsafe_b64encode(derived))


def _key() -> Fernet:
    return _fernet(settings.CTXVIEW_ENCRYPTION_KEY or settings.SECRET_KEY)


def seal(secret: str) -> str:
    return PREFIX + _key().encrypt(secret.encode()).decode("ascii")


def unseal(sealed: str) -> str:
    if not sealed.startswith(PREFIX):
        raise Unreadable("not a sealed value")
    try:
        return _key().decrypt(sealed[len(PREFIX) :].encode("ascii")).decode()
    except (InvalidToken, UnicodeError, ValueError):
        raise Unreadable("sealed under another key") from None
