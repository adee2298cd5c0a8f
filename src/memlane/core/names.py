"""The one rule for names: users (namespaces), conversation and session ids, API key labels.

A name is shown to people (in listings, logs, an admin's terminal) and compared by machines. The rule makes
the two agree: what a name looks like is what it is. A name of a user, conversation or session is also a
segment of a URL path (``/v1/users/{user}/...``, ``/v1/sessions/{id}``, the Agent Memory routes), so it
must stay one segment whatever client builds the URL:

* 1 to 256 characters, in Unicode normalization form NFC;
* no whitespace at either end, and no whitespace inside but the plain space (U+0020);
* every character printable: no control characters (C0, DEL, C1 such as U+0085), no format characters
  (U+202E right-to-left override, U+200B zero-width space, U+200D zero-width joiner, U+FEFF, soft
  hyphen), no line or paragraph separators, no lone surrogates, private-use or unassigned code points;
* (users, conversations, sessions, not key labels) none of ``/ ? # %``, and not ``.`` or ``..``. A ``/``
  splits the segment in two even percent-encoded (servers decode ``%2F`` before routing), and the Agent
  Memory contract's clients refuse all four characters and the two dot names in an id (a client collapses
  ``.`` and ``..`` segments and reaches another route). Allowing what one interface can reach and another
  cannot would make a user that the console or an SDK cannot open or delete.

A name that breaks the rule is refused, not repaired. Repairing (trimming, normalizing, dropping
characters) would map several inputs onto one stored name, so two callers who believe they use different
namespaces would share one, and a caller could not find their name again in what memlane lists. A refusal
says which character is wrong and where, and the caller fixes it once. (NFC is checked, not applied, for the
same reason: the message gives the NFC form to use.) The price: emoji sequences joined by U+200D and
scripts that need U+200C/U+200D inside words cannot be names.

Names stored before this rule (which only refused C0 control characters, and a ``/`` only at
``POST /v1/users``) stay readable and deletable: reads and deletes take them by :func:`check_stored_name`,
the old rule; only writes that create or add to a namespace apply :func:`check_name`. A stored name with a
``/`` cannot be a URL segment, so it is reached through the Python API and the CLI, which take names as
arguments (``memlane keys create``, ``memlane delete-user``, ``memlane list``); a key made for it serves the
``/v1`` routes that take the user from the key (``GET /v1/memories``, ``POST /v1/search``).
"""

from __future__ import annotations

import unicodedata

from memlane.core.errors import ValidationError

MAX_NAME_CHARS = 256
# Categories of characters a name may not hold: other (control, format, surrogate, private use,
# unassigned) and separators (line, paragraph; spaces are checked one by one, only U+0020 passes).
_REFUSED_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
# What cannot be one segment of a URL path for every client (the module doc says why).
PATH_CHARACTERS = "/?#%"
DOT_NAMES = (".", "..")


def _describe(ch: str) -> str:
    name = unicodedata.name(ch, "")
    return f"U+{ord(ch):04X}" + (f" ({name.lower()})" if name else "")


def check_text(value: str, field: str) -> str:
    """Text that can be stored: a Python str holding no lone surrogate (the result of decoding bytes that
    were not UTF-8 with ``surrogateescape``, or of a JSON escape such as ``"\\ud800"``)."""
    try:
        value.encode("utf-8")  # the check at C speed: a message may be 64 KiB
    except UnicodeEncodeError as exc:
        raise ValidationError(
            f"{_describe(value[exc.start])} at character {exc.start + 1} is a lone surrogate: not valid Unicode "
            "text (bytes that are not UTF-8, or a JSON escape of half a surrogate pair)",
            where=field,
        ) from None
    return value


def check_stored_name(value: str, field: str) -> str:
    """The rule names had before :func:`check_name`: what a read or a delete accepts, so that data stored
    under such a name stays reachable. Non-empty text, at most 256 characters, no C0 control characters."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError("must be non-empty text", where=field)
    if len(value) > MAX_NAME_CHARS:
        raise ValidationError(f"longer than {MAX_NAME_CHARS} characters", where=field)
    if any(ord(c) < 32 for c in value):
        raise ValidationError("contains control characters", where=field)
    return check_text(value, field)


def check_name(value: str, field: str) -> str:
    """A name of a user, conversation or session as the module doc defines it, or a ValidationError naming
    ``field``, the offending character (code point and Unicode name) and its position."""
    _check_printable(value, field)
    for i, ch in enumerate(value):
        if ch in PATH_CHARACTERS:
            raise ValidationError(
                f"{ch!r} at character {i + 1} is not allowed in a name: names are segments of URL paths, "
                f"which cannot hold any of {' '.join(PATH_CHARACTERS)} (use another character, such as '-' or ':')",
                where=field,
            )
    if value in DOT_NAMES:
        raise ValidationError(f"{value!r} is not a name: as a URL path segment it means a folder", where=field)
    return value


def _check_printable(value: str, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError("must be non-empty text", where=field)
    if len(value) > MAX_NAME_CHARS:
        raise ValidationError(f"longer than {MAX_NAME_CHARS} characters", where=field)
    check_text(value, field)
    for i, ch in enumerate(value):
        category = unicodedata.category(ch)
        if category in _REFUSED_CATEGORIES or (category == "Zs" and ch != " ") or (ch.isspace() and ch != " "):
            raise ValidationError(
                f"{_describe(ch)} at character {i + 1} is not allowed in a name: names are printable "
                "characters, and the plain space is their only whitespace",
                where=field,
            )
    if value != value.strip():
        raise ValidationError("begins or ends with a space", where=field)
    normal = unicodedata.normalize("NFC", value)
    if normal != value:
        raise ValidationError(f"not in Unicode normalization form NFC; its NFC form is {normal!r}", where=field)
    return value


def check_label(value: str, field: str) -> str:
    """A label (an API key's note for the admin): empty, or printable text by :func:`check_name`'s rule
    (it is never part of a URL, so ``/`` and the like are allowed)."""
    return value if value == "" else _check_printable(value, field)


def shown(name: str) -> str:
    """``name`` as a terminal should print it: itself when it is printable by :func:`check_name`'s rule,
    else escaped (a name stored before the rule may hold a right-to-left override or a trailing space)."""
    try:
        return _check_printable(name, "name")
    except ValidationError:
        return ascii(name)
