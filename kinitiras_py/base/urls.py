"""URL text parsed with yarl, refused with ValueError whatever the parser raises."""

from __future__ import annotations

from yarl import URL


def parse_url(text: str) -> URL:
    """``text`` as a yarl URL; ValueError when it is not one (TypeError when not a string).

    yarl 1.25 raises IndexError, not ValueError, for some malformed authorities (``http://[]@``,
    an empty host after user info): every URL that users, policies or redirects write is parsed
    here, so that each caller's refusal covers them.
    """
    try:
        return URL(text)
    except IndexError:
        raise ValueError("its host is empty or malformed") from None
