"""What every family's config dataclass shares: plain-dict round trips with checked fields."""
from dataclasses import asdict, fields
from typing import Any, Dict, Type, TypeVar

T = TypeVar("T", bound="DictConfig")


class DictConfig:
    """Mixin for config dataclasses: `to_dict` and a `from_dict` that names unknown fields."""

    def to_dict(self) -> Dict[str, Any]:
        """The fields as a plain dict (as our checkpoints' config.json stores them)."""
        return asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls: Type[T], data: Dict[str, Any]) -> T:
        """The config of a plain dict; a ValueError names any field the dataclass does not have."""
        known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"Unknown {cls.__name__} field(s) {unknown}; known fields: {sorted(known)}")
        return cls(**data)
