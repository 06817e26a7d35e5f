"""The SDK's version, sent on every span as ``ctxview.sdk.version``."""

__version__ = "0.1.0"
