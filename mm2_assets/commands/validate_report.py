"""What `mm2-assets validate` found, and how it prints it: as text, or as one JSON document.

The JSON document (`--json`) has this schema (every key always present):

```
{
  "config": str,                # the file as named
  "valid": bool,                # no error anywhere: the exit code is 0 exactly when true
  "errors": [                   # configuration errors (the loader stops at the first)
    {"file": str, "key": str | null, "value": str | null, "reason": str}
  ],
  "warnings": [{"key": str, "reason": str}],   # keys MM2 ignores
  "clusters": [
    {"alias": str, "bootstrap_servers": str,
     "reachable": bool | null,  # null: not probed (no flow uses it)
     "error": str | null}
  ],
  "flows": [
    {"name": "src->tgt", "source": str, "target": str,
     "enabled": bool,           # false: a heartbeats-only pair
     "replication_policy": str, "mode": "batch" | "follow",
     "settings": [{"key": str, "set_as": str, "value": str, "default": str}],
     "internal_topics": [{"cluster": str, "topic": str, "holds": str}],
     "topics": {upstream: remote} | null,   # null: not listed (disabled or unreachable)
     "groups": [str] | null,
     "error": str | null}
  ]
}
```

Values of secret keys are masked; errors never carry a secret (see `mm2.secrets`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from mm2_assets.mm2.setting_changes import SettingChange

__all__ = [
    "ClusterStatus",
    "ConfigProblem",
    "FlowReport",
    "InternalTopic",
    "ValidationReport",
    "render_json",
    "render_text",
]


@dataclass(frozen=True)
class ConfigProblem:
    """A configuration error: the file, the key as written (if any), its masked value and the
    reason with the fix."""

    file: str
    key: str | None
    value: str | None
    reason: str


@dataclass(frozen=True)
class ClusterStatus:
    """Whether a cluster answered; `reachable` is None when no flow needed it."""

    alias: str
    bootstrap_servers: str
    reachable: bool | None
    error: str | None = None


@dataclass(frozen=True)
class InternalTopic:
    """An MM2 (or mm2-assets) internal topic a flow writes: where, and what it holds."""

    cluster: str
    topic: str
    holds: str


@dataclass
class FlowReport:
    """One resolved flow: its settings off the defaults and, when listed, what it replicates."""

    name: str
    source: str
    target: str
    enabled: bool
    replication_policy: str
    mode: str
    settings: list[SettingChange] = field(default_factory=list)
    internal_topics: list[InternalTopic] = field(default_factory=list)
    topics: dict[str, str] | None = None
    groups: list[str] | None = None
    error: str | None = None


@dataclass
class ValidationReport:
    """Everything `validate` found about one configuration file."""

    config: str
    errors: list[ConfigProblem] = field(default_factory=list)
    warnings: dict[str, str] = field(default_factory=dict)
    clusters: list[ClusterStatus] = field(default_factory=list)
    flows: list[FlowReport] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        """No configuration error, every needed cluster answered, every listing worked."""
        return (
            not self.errors
            and all(c.reachable is not False for c in self.clusters)
            and all(f.error is None for f in self.flows)
        )


def render_json(report: ValidationReport) -> str:
    """The report as one JSON document (schema in the module docstring)."""
    document = {
        "config": report.config,
        "valid": report.valid,
        "errors": [asdict(e) for e in report.errors],
        "warnings": [{"key": k, "reason": r} for k, r in report.warnings.items()],
        "clusters": [asdict(c) for c in report.clusters],
        "flows": [asdict(f) for f in report.flows],
    }
    return json.dumps(document, indent=2) + "\n"


def _flow_lines(flow: FlowReport) -> list[str]:
    state = "enabled" if flow.enabled else "not enabled (heartbeats only)"
    lines = [
        f"flow {flow.name}: {state}, {flow.mode} mode, policy {flow.replication_policy}",
    ]
    if flow.settings:
        lines.append("  settings differing from the defaults:")
        lines += [
            f"    {s.set_as} = {s.value}    (default: {s.default or '(empty)'})"
            for s in flow.settings
        ]
    else:
        lines.append("  every setting at its default")
    if flow.internal_topics:
        lines.append("  internal topics:")
        lines += [f"    {t.cluster}: {t.topic} ({t.holds})" for t in flow.internal_topics]
    if flow.error is not None:
        lines.append(f"  error: {flow.error}")
    if flow.topics is not None:
        lines.append(f"  topics replicated now ({len(flow.topics)}): source -> {flow.target}")
        lines += [f"    {upstream} -> {remote}" for upstream, remote in flow.topics.items()]
    if flow.groups is not None:
        lines.append(f"  consumer groups checkpointed now ({len(flow.groups)}):")
        lines += [f"    {group}" for group in flow.groups]
    return lines


def render_text(report: ValidationReport) -> str:
    """The report for a terminal: errors first, then clusters and flows, then the verdict."""
    lines = [f"config: {report.config}"]
    for problem in report.errors:
        where = problem.file
        if problem.key is not None:
            value = "" if problem.value is None else f"={problem.value!r}"
            where += f": {problem.key}{value}"
        lines.append(f"error: {where}: {problem.reason}")
    for key, reason in report.warnings.items():
        lines.append(f"warning: {key}: {reason}")
    for cluster in report.clusters:
        state = {True: "reachable", False: "FAILED", None: "not used by any flow"}
        line = f"cluster {cluster.alias} ({cluster.bootstrap_servers}): {state[cluster.reachable]}"
        if cluster.error is not None:
            line += f": {cluster.error}"
        lines.append(line)
    for flow in report.flows:
        lines += _flow_lines(flow)
    problems = len(report.errors) + sum(c.reachable is False for c in report.clusters)
    problems += sum(f.error is not None for f in report.flows)
    lines.append("valid" if report.valid else f"invalid: {problems} problem(s)")
    return "\n".join(lines) + "\n"
