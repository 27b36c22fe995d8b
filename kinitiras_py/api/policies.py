"""The four policy kinds of ``policy.kcloudlabs.io/v1alpha1`` and the entry points to read them.

``parse_policy`` turns a decoded object into a model, or raises ``PolicyErrors`` listing every
problem with its field path. Models keep the source dict as ``raw`` (every nested model too), so
code that works on the original YAML shapes can still reach them.
"""

# prop() returns dataclasses.field(...): nothing is shared between instances.

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from kinitiras_py.api import schema
from kinitiras_py.api.core import Int64
from kinitiras_py.api.overrides import OverridePolicySpec, OverrideRule
from kinitiras_py.api.schema import Model, prop
from kinitiras_py.api.selectors import ResourceSelector
from kinitiras_py.api.status import PolicyStatus
from kinitiras_py.api.validations import ValidatePolicySpec, ValidateRule
from kinitiras_py.base.errors import PolicyError, PolicyErrors
from kinitiras_py.base.typedefs import JSON, Obj

GROUP = "policy.kcloudlabs.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
ENVELOPE = ("apiVersion", "kind", "metadata", "spec", "status")


@dataclass(frozen=True)
class KindInfo:
    """Names and scope of one kind, as its CustomResourceDefinition declares them."""

    kind: str
    plural: str
    singular: str
    short_name: str
    scope: Literal["Namespaced", "Cluster"]

    @property
    def namespaced(self) -> bool:
        """True when objects of this kind live in a namespace."""
        return self.scope == "Namespaced"

    @property
    def crd_name(self) -> str:
        """``<plural>.<group>``, the name of the CustomResourceDefinition."""
        return f"{self.plural}.{GROUP}"


@dataclass(frozen=True, kw_only=True)
class ObjectMeta(Model):
    """The parts of a policy's metadata the controller uses; ``raw`` has all of it."""

    OPEN = True

    name: str = prop("Name of the policy.", factory=str)
    namespace: str | None = prop("Namespace, for namespaced kinds.")
    uid: str = prop("Unique id given by the API server.", factory=str)
    generation: Int64 = prop("Incremented by the API server on every spec change.", factory=int)
    resource_version: str = prop("Version of this object in the API server.", factory=str)
    labels: dict[str, str] = prop("Labels.", factory=dict)
    annotations: dict[str, str] = prop("Annotations.", factory=dict)


@dataclass(frozen=True, kw_only=True)
class BasePolicy:
    """What every kind has: metadata, an optional status, the source dict."""

    INFO: ClassVar[KindInfo]
    SPEC: ClassVar[type[Model]]
    SPEC_REQUIRED: ClassVar[bool] = True
    """Every kind needs a spec: without one a policy has no rules and can only be a mistake
    (kinitiras required it for ClusterOverridePolicy only)."""

    metadata: ObjectMeta
    status: PolicyStatus | None = None
    raw: Obj = field(default_factory=dict, repr=False, compare=False)

    @property
    def ref(self) -> str:
        """How messages name this policy: ``OverridePolicy default/foo`` or ``ClusterOverridePolicy foo``."""
        return _ref(self.INFO.kind, self.metadata.namespace, self.metadata.name)


@dataclass(frozen=True, kw_only=True)
class BaseOverridePolicy(BasePolicy):
    """OverridePolicy and ClusterOverridePolicy: mutate the objects they select."""

    SPEC = OverridePolicySpec

    spec: OverridePolicySpec | None = None

    @property
    def rules(self) -> list[OverrideRule]:
        """``spec.overrideRules``, in order ([] without a spec)."""
        return self.spec.override_rules if self.spec else []

    @property
    def selectors(self) -> list[ResourceSelector]:
        """``spec.resourceSelectors`` ([] selects every object)."""
        return self.spec.resource_selectors if self.spec else []


@dataclass(frozen=True, kw_only=True)
class BaseValidatePolicy(BasePolicy):
    """ClusterValidatePolicy and ValidatePolicy: admit or refuse the objects they select."""

    SPEC = ValidatePolicySpec

    spec: ValidatePolicySpec | None = None

    @property
    def rules(self) -> list[ValidateRule]:
        """``spec.validateRules``, in order ([] without a spec)."""
        return self.spec.validate_rules if self.spec else []

    @property
    def selectors(self) -> list[ResourceSelector]:
        """``spec.resourceSelectors`` ([] selects every object)."""
        return self.spec.resource_selectors if self.spec else []


@dataclass(frozen=True, kw_only=True)
class OverridePolicy(BaseOverridePolicy):
    """Changes objects in its own namespace as they are created or updated."""

    INFO = KindInfo("OverridePolicy", "overridepolicies", "overridepolicy", "op", "Namespaced")


@dataclass(frozen=True, kw_only=True)
class ClusterOverridePolicy(BaseOverridePolicy):
    """Changes objects in every namespace as they are created or updated; applied before
    OverridePolicies."""

    INFO = KindInfo("ClusterOverridePolicy", "clusteroverridepolicies", "clusteroverridepolicy",
                    "cop", "Cluster")


@dataclass(frozen=True, kw_only=True)
class ClusterValidatePolicy(BaseValidatePolicy):
    """Admits or refuses requests on objects in every namespace."""

    INFO = KindInfo("ClusterValidatePolicy", "clustervalidatepolicies", "clustervalidatepolicy",
                    "cvp", "Cluster")


@dataclass(frozen=True, kw_only=True)
class ValidatePolicy(BaseValidatePolicy):
    """Admits or refuses requests on objects in its own namespace."""

    INFO = KindInfo("ValidatePolicy", "validatepolicies", "validatepolicy", "vp", "Namespaced")


Policy = OverridePolicy | ClusterOverridePolicy | ClusterValidatePolicy | ValidatePolicy
POLICY_CLASSES: tuple[type[Policy], ...] = (OverridePolicy, ClusterOverridePolicy,
                                            ClusterValidatePolicy, ValidatePolicy)
KINDS: dict[str, KindInfo] = {cls.INFO.kind: cls.INFO for cls in POLICY_CLASSES}
_CLASSES: dict[str, type[Policy]] = {cls.INFO.kind: cls for cls in POLICY_CLASSES}


def is_policy(obj: JSON) -> bool:
    """True when ``obj`` claims to be one of our kinds (group and kind; the version is not checked)."""
    if not isinstance(obj, dict):
        return False
    group = str(obj.get("apiVersion") or "").partition("/")[0]
    return group == GROUP and obj.get("kind") in KINDS


def policy_ref(obj: Obj | BasePolicy) -> str:
    """How messages name a policy: ``OverridePolicy default/foo``, ``ClusterValidatePolicy bar``."""
    if isinstance(obj, BasePolicy):
        return obj.ref
    kind = str(obj.get("kind") or "")
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    info = KINDS.get(kind)
    namespace = meta.get("namespace") if info is None or info.namespaced else None
    return _ref(kind, namespace, meta.get("name"))


def _ref(kind: str, namespace: Any, name: Any) -> str:
    name = name or "<unnamed>"
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def parse_policy(obj: JSON) -> Policy:
    """Build the model of a policy; raise ``PolicyErrors`` (every problem, with its field path)."""
    model, errors = _parse_policy(obj, partial=False)
    if errors or model is None:
        raise PolicyErrors(errors, policy_ref(obj) if isinstance(obj, dict) else None)
    return model


def parse_policy_partial(obj: JSON) -> tuple[Policy | None, list[PolicyError]]:
    """The model of a policy built as far as it goes, and every problem with its field path.

    The model is None only when ``obj`` is not one of our kinds (not an object, wrong
    ``apiVersion`` or ``kind``). Otherwise a field that failed is reported and left absent (at its
    default, else None, even where its type says it is required), so the rest is still a typed
    model for the semantic checks: see :func:`.schema.parse_into`.
    """
    return _parse_policy(obj, partial=True)


def _parse_policy(obj: JSON, partial: bool) -> tuple[Policy | None, list[PolicyError]]:
    if not isinstance(obj, dict):
        return None, [PolicyError("", f"a policy must be an object, got {schema.json_type(obj)}")]
    errors: list[PolicyError] = []
    if obj.get("apiVersion") != API_VERSION:
        errors.append(PolicyError("apiVersion", schema.unsupported(obj.get("apiVersion"), (API_VERSION,))))
    cls = _CLASSES.get(str(obj.get("kind")))
    if cls is None:
        errors.append(PolicyError("kind", schema.unsupported(obj.get("kind"), tuple(KINDS))))
    if errors or cls is None:
        return None, errors
    errors.extend(PolicyError(str(key), "unknown field") for key in obj if key not in ENVELOPE)
    parts: dict[str, Any] = {
        "metadata": schema.parse_into(ObjectMeta, obj.get("metadata") or {}, "metadata", errors, partial),
        "raw": obj,
    }
    if obj.get("spec") is not None:
        parts["spec"] = schema.parse_into(cls.SPEC, obj["spec"], "spec", errors, partial)
    elif cls.SPEC_REQUIRED:
        errors.append(PolicyError("spec", "required field is missing"))
    if obj.get("status") is not None:
        parts["status"] = schema.parse_into(PolicyStatus, obj["status"], "status", errors, partial)
    if errors and not partial:
        return None, errors
    return cls(**parts), errors
