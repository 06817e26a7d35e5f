"""What PostgreSQL can store: jsonb and text hold no NUL and no lone surrogate, jsonb no NaN."""

import math


def assert_storable(value, where: str = "value") -> None:
    """Fail with the path of the first value PostgreSQL would refuse (iteratively: values nest deep)."""
    stack = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            assert "\x00" not in item, f"{path}: NUL in {item[:60]!r}"
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise AssertionError(f"{path}: lone surrogate in {item[:60]!r}") from None
        elif isinstance(item, float):
            assert math.isfinite(item), f"{path}: {item} is not a JSON number"
        elif isinstance(item, dict):
            for key, child in item.items():
                stack.append((key, f"{path} key"))
                stack.append((child, f"{path}.{key!s:.40}"))
        elif isinstance(item, (list, tuple)):
            stack.extend((child, f"{path}[{index}]") for index, child in enumerate(item))
        else:
            assert item is None or isinstance(item, (bool, int)), f"{path}: {type(item).__name__}"
