"""Device lists in PyTorch Lightning's forms, for ``tabjob run --devices`` (README.md, "The command line").

``3`` / ``"3"`` -> the first three; ``"3,"`` -> [3]; ``[1, 3]`` / ``"1, 3"`` -> [1, 3]; ``-1`` / ``"-1"`` -> all
visible; ``"auto"`` -> all visible (possibly none). ``0``, ``"0"``, ``[]`` and duplicates are errors, and so is
an id that is not visible. Ids are relative to CUDA_VISIBLE_DEVICES, as CUDA numbers them inside a process.
"""

from __future__ import annotations

from collections.abc import Sequence


class DeviceError(ValueError):
    """A device list that cannot be honoured; the message says what would be valid."""


def parse_devices(value: int | str | Sequence[int], visible: int) -> list[int]:
    """Resolve ``value`` to a list of device ids among ``visible`` devices."""
    ids = _parse(value, visible)
    if len(set(ids)) != len(ids):
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        raise DeviceError(f"devices {value!r}: duplicate ids {dupes}; list each device once")
    missing = [i for i in ids if i < 0 or i >= visible]
    if missing:
        seen = f"ids 0..{visible - 1}" if visible else "none"
        raise DeviceError(f"devices {value!r}: {missing} not visible ({visible} visible: {seen})")
    return ids


def _parse(value: int | str | Sequence[int], visible: int) -> list[int]:
    if isinstance(value, bool):
        raise DeviceError(f"devices {value!r}: expected a count, a list of ids, '-1' or 'auto'")
    if isinstance(value, int):
        return _count(value, visible, value)
    if isinstance(value, str):
        text = value.strip()
        if text == "auto":
            return list(range(visible))
        if "," in text:
            parts = [p.strip() for p in text.split(",") if p.strip()]
            if not parts:
                raise DeviceError(f"devices {value!r}: no device ids given")
            return [_int(p, value) for p in parts]
        return _count(_int(text, value), visible, value)
    ids = list(value)
    if not ids:
        raise DeviceError("devices []: an empty list selects no device; give ids such as [0, 1] or use the CPU")
    return [_int(i, value) for i in ids]


def _count(n: int, visible: int, original: object) -> list[int]:
    if n == -1:
        if visible == 0:
            raise DeviceError(f"devices {original!r}: all visible devices requested but none is visible")
        return list(range(visible))
    if n == 0:
        raise DeviceError(f"devices {original!r}: 0 devices selects nothing; give a count >= 1, ids, or -1")
    if n < -1:
        raise DeviceError(f"devices {original!r}: a count must be >= 1, or -1 for all")
    if n > visible:
        raise DeviceError(f"devices {original!r}: {n} requested but {visible} visible")
    return list(range(n))


def _int(item: object, original: object) -> int:
    if isinstance(item, bool):
        raise DeviceError(f"devices {original!r}: {item!r} is not a device id")
    try:
        return int(str(item).strip())
    except ValueError:
        raise DeviceError(f"devices {original!r}: {item!r} is not a device id (an integer)") from None
