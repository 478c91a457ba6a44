"""The volume sources a TabularJob may mount, typed so that only the allowed kinds exist in the CRD.

Anything else (hostPath above all) would give a user who may create TabularJobs but not pods a way onto the node:
it is an unknown field to the API server and to ``tabjob validate``. The output needs a writable source: secret and
configMap volumes are read-only. The operator may narrow these lists further (tabjob.api.platform_policy).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from tabjob.api.base import MAX_LIST, QUANTITY_PATTERN, ApiModel, Int, parse_quantity

# The volume sources a TabularJob may mount. Anything else (hostPath above all) would give a user who may create
# TabularJobs but not pods a way onto the node. The output needs a writable one: secret and configMap are read-only.
DATA_VOLUME_SOURCES = ("persistentVolumeClaim", "configMap", "secret", "emptyDir", "csi", "nfs")
OUTPUT_VOLUME_SOURCES = ("persistentVolumeClaim", "emptyDir", "csi", "nfs")


class KeyToPath(ApiModel):
    """One key of a ConfigMap or Secret projected to a file."""

    key: str = Field(min_length=1, max_length=253, description="The key.")
    path: str = Field(
        min_length=1,
        max_length=4096,
        description="Relative file path, without '..'.",
        json_schema_extra={"pattern": r"^[^/]"},
    )
    mode: Annotated[Int, Field(ge=0, le=0o777)] | None = Field(default=None, description="File mode bits (0..0777).")

    @field_validator("path")
    @classmethod
    def _relative(cls, v: str) -> str:
        if v.startswith("/") or ".." in v.split("/"):
            raise ValueError("a relative path without '..'")
        return v


class PersistentVolumeClaimSource(ApiModel):
    """A PersistentVolumeClaim in the job's namespace."""

    claim_name: str = Field(min_length=1, max_length=253, description="The claim's name.")
    read_only: bool | None = Field(default=None, description="Mount read-only (the data volume always is).")


class ConfigMapSource(ApiModel):
    """A ConfigMap's keys as files (read-only)."""

    name: str = Field(min_length=1, max_length=253, description="The ConfigMap's name.")
    items: list[KeyToPath] | None = Field(default=None, max_length=MAX_LIST, description="Keys to project.")
    default_mode: Annotated[Int, Field(ge=0, le=0o777)] | None = Field(
        default=None, description="Mode bits of the files."
    )
    optional: bool | None = Field(default=None, description="Mount even when the ConfigMap is missing.")


class SecretSource(ApiModel):
    """A Secret's keys as files (read-only)."""

    secret_name: str = Field(min_length=1, max_length=253, description="The Secret's name.")
    items: list[KeyToPath] | None = Field(default=None, max_length=MAX_LIST, description="Keys to project.")
    default_mode: Annotated[Int, Field(ge=0, le=0o777)] | None = Field(
        default=None, description="Mode bits of the files."
    )
    optional: bool | None = Field(default=None, description="Mount even when the Secret is missing.")


class EmptyDirSource(ApiModel):
    """Scratch space that lives as long as the pod."""

    medium: Literal["", "Memory"] | None = Field(default=None, description="'' (node disk) or Memory.")
    size_limit: str | None = Field(
        default=None,
        description="Largest size, a Kubernetes quantity (10Gi).",
        json_schema_extra={"pattern": QUANTITY_PATTERN, "maxLength": 64},
    )

    @field_validator("size_limit")
    @classmethod
    def _quantity(cls, v: str | None) -> str | None:
        if v is not None:
            parse_quantity(v)
        return v


class SecretReference(ApiModel):
    """A Secret in the job's namespace."""

    name: str = Field(min_length=1, max_length=253, description="The Secret's name.")


class CSISource(ApiModel):
    """An inline CSI volume."""

    driver: str = Field(min_length=1, max_length=63, description="The CSI driver's name.")
    read_only: bool | None = Field(default=None, description="Mount read-only.")
    fs_type: str | None = Field(default=None, max_length=63, description="Filesystem type (ext4, xfs).")
    volume_attributes: dict[str, Annotated[str, Field(max_length=4096)]] | None = Field(
        default=None, max_length=MAX_LIST, description="Driver-specific attributes."
    )
    node_publish_secret_ref: SecretReference | None = Field(default=None, description="Secret for the driver.")


class NFSSource(ApiModel):
    """An NFS export."""

    server: str = Field(min_length=1, max_length=253, description="NFS server host name or address.")
    path: str = Field(
        min_length=1, max_length=4096, description="Exported path (absolute).", json_schema_extra={"pattern": "^/"}
    )
    read_only: bool | None = Field(default=None, description="Mount read-only.")

    @field_validator("path")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError("an absolute path, e.g. /exports/datasets")
        return v


_SOURCE_FIELDS = {
    "persistentVolumeClaim": "persistent_volume_claim",
    "configMap": "config_map",
    "secret": "secret",
    "emptyDir": "empty_dir",
    "csi": "csi",
    "nfs": "nfs",
}


def _one_of_rule(sources: tuple[str, ...], role: str) -> dict[str, Any]:
    return {
        "rule": "[" + ", ".join(f"has(self.{s})" for s in sources) + "].filter(x, x).size() == 1",
        "message": f"set exactly one volume source; the {role} volume may be one of {', '.join(sources)}",
        "reason": "FieldValueInvalid",
    }


class VolumeSource(ApiModel):
    """What the data and output volume sources share."""

    def kind(self) -> str:
        return next(k for k, attr in _SOURCE_FIELDS.items() if getattr(self, attr, None) is not None)

    def to_pod_volume(self) -> dict[str, Any]:
        """The source as a pod's volume entry takes it (without the name)."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")

    @model_validator(mode="after")
    def _exactly_one(self) -> VolumeSource:
        allowed = [k for k, attr in _SOURCE_FIELDS.items() if attr in type(self).model_fields]
        if sum(getattr(self, _SOURCE_FIELDS[k]) is not None for k in allowed) != 1:
            raise ValueError(f"set exactly one volume source: one of {', '.join(allowed)}")
        return self


class DataVolume(VolumeSource):
    """The data volume's source: one of persistentVolumeClaim, configMap, secret, emptyDir, csi, nfs."""

    model_config = ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [_one_of_rule(DATA_VOLUME_SOURCES, "data")]}
    )

    persistent_volume_claim: PersistentVolumeClaimSource | None = Field(default=None, description="A claim.")
    config_map: ConfigMapSource | None = Field(default=None, description="A ConfigMap.")
    secret: SecretSource | None = Field(default=None, description="A Secret.")
    empty_dir: EmptyDirSource | None = Field(default=None, description="Scratch space.")
    csi: CSISource | None = Field(default=None, description="An inline CSI volume.")
    nfs: NFSSource | None = Field(default=None, description="An NFS export.")


class OutputVolume(VolumeSource):
    """The output volume's source (writable): one of persistentVolumeClaim, emptyDir, csi, nfs."""

    model_config = ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [_one_of_rule(OUTPUT_VOLUME_SOURCES, "output")]}
    )

    persistent_volume_claim: PersistentVolumeClaimSource | None = Field(default=None, description="A claim.")
    empty_dir: EmptyDirSource | None = Field(default=None, description="Scratch space.")
    csi: CSISource | None = Field(default=None, description="An inline CSI volume.")
    nfs: NFSSource | None = Field(default=None, description="An NFS export.")
