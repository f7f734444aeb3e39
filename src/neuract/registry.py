"""Named registries for model families (``--actuator.type=stribeck``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from neuract.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """A name -> object mapping whose unknown-name error lists the valid names.

    >>> ACTUATORS = Registry("actuator")
    >>> @ACTUATORS.register("dc_motor")
    ... class DCMotor: ...
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            if name in self._items:
                raise ConfigError(f"{self.kind} {name!r} is already registered")
            self._items[name] = obj
            return obj

        return deco

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            valid = ", ".join(sorted(self._items)) or "(none registered)"
            raise ConfigError(
                f"unknown {self.kind} type {name!r}; valid {self.kind} types: {valid}"
            ) from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))
