"""Redaction: replace host names, IP addresses, user names, e-mail addresses and secrets by stable pseudonyms.

Logs of a failed job are often shared (tickets, issues, vendors) and carry what should not travel: host names
and IPs of the cluster, the user's name in paths, e-mail addresses, and sometimes tokens printed by a
launcher or an ``env`` dump. A :class:`Redactor` replaces each distinct value by a pseudonym that is stable
for the life of the redactor: the same host is ``host-1`` in every file, every column, every warning.

What is replaced (in this order, so that a secret or e-mail is never half-redacted as a host):

1. secrets -> ``<secret-N>``: Hugging Face ``hf_…`` tokens, W&B API keys (40 hex digits after
   ``WANDB_API_KEY``/``wandb login``, any 40-hex run on a line that names ``wandb`` or W&B whatever the
   quoting around it, and ``local-…`` keys), AWS access key ids (``AKIA…``/``ASIA…``) and
   secret keys (``aws_secret_access_key=…``), GitHub tokens (``ghp_/gho_/ghu_/ghs_/ghr_``, ``github_pat_``),
   ``Authorization: Bearer|Basic …`` headers, credentials in URLs (``scheme://user:pass@``), and values of
   ``--password=…``/``--token …``/``--api-key …``/``--secret …`` style arguments and ``*_TOKEN=``,
   ``*_PASSWORD=``, ``*_SECRET=``, ``*_API_KEY=`` environment assignments (the name is kept, the value
   replaced);
2. e-mail addresses -> ``email-N``;
3. user names in home/data paths (``/home/alice/``, ``/Users/alice/``, ``/data/alice/``, ``/scratch/…``,
   ``C:\\Users\\alice``) -> ``user-N``; names learned from ``/home`` and ``/Users`` paths are also replaced
   where they stand alone (``USER=alice``);
4. IPv4 and IPv6 addresses -> ``ip-N`` (an IPv4-mapped IPv6 address keeps its ``::ffff:`` prefix).
   **Loopback and unspecified addresses are kept** (``127.0.0.0/8``, ``0.0.0.0``, ``::1``, ``::``,
   ``::ffff:127.0.0.1``): they reveal nothing about a site and say something useful (a single-node job,
   a store bound to all interfaces);
5. host names -> ``host-N``: names learned from the event table's ``host`` column, NCCL line prefixes
   (``node-a:15325:16199 [2] NCCL``), torchelastic summaries (``host : node-a.example.com``), file names
   (``node-a.rank3.err``), torchrun log and run folders named after their host (``torchrun_logs-node-a``,
   ``run-node-a/attempt_0``: the name after the first ``-`` of the folders above ``attempt_N``; a learned
   host is replaced glued to a word by ``-`` or ``_`` too), and FQDNs with a known top-level domain. A fully qualified name keeps its shape:
   ``node-a.cluster.example.com`` -> ``host-1.domain-1``, so its short name is the pseudonym of ``node-a``
   everywhere. ``localhost`` is kept.

Same input, same pseudonym: one :class:`Redactor` is used across all files, columns and warnings of one
run, so rank identity that rests on host names (NCCL ``host:pid`` prefixes, per-host files) is preserved
and diagnosing the redacted copy names the same ranks as the original.

API: :func:`redact_table`, :func:`redact_result` (what ``--redact`` calls), :func:`redact_dir` (a redacted
copy of a log directory, file names included; ``rankscope redact DIR -o OUT_DIR``, in
:mod:`correlator.cli.redact`).
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import ipaddress
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:  # pragma: no cover
    from correlator.discover import Source
    from correlator.ingest import IngestResult
    from correlator.read import ReadResult

# ---------------------------------------------------------------------------------------------- patterns

#: A secret value after a key (``--token X``, ``API_KEY=X``): bounded, so that no line costs more than linear time.
_SECRET_TOKEN = r"[A-Za-z0-9_\-./+=~:@%$!*#&^]{4,512}"
_KEYWORDS = (
    r"password|passwd|pwd|passphrase|token|secret|api[-_]?key|apikey|access[-_]?key|private[-_]?key"
    r"|client[-_]?secret|auth|credentials?|sas"
)
#: (pattern, group holding the secret: 0 = whole match). Every repetition is bounded (no quadratic backtracking
#: on a long dotted or ``TOKENTOKEN…`` line); lines are also capped at read time (RANKSCOPE_MAX_LINE_KB).
_SECRET_PATTERNS: list[tuple[re.Pattern[str], int]] = [
    (re.compile(r"\bhf_[A-Za-z0-9]{20,80}\b"), 0),  # Hugging Face
    (re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,255}\b"), 0),  # GitHub
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,255}"), 0),  # GitHub fine-grained
    (re.compile(r"\bglpat-[A-Za-z0-9_-]{20,64}"), 0),  # GitLab
    (re.compile(r"\b(?:AKIA|ASIA|AROA|AIDA)[A-Z0-9]{16}\b"), 0),  # AWS key id
    (
        re.compile(r"\bsk-(?:proj-|ant-(?:api\d\d-)?|svcacct-|admin-)?[A-Za-z0-9_-]{20,200}"),
        0,
    ),  # OpenAI / Anthropic
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"), 0),  # Google API key
    (re.compile(r"\bya29\.[0-9A-Za-z_-]{20,400}"), 0),  # Google OAuth token
    (re.compile(r"\bxox[abprse]-[A-Za-z0-9-]{10,200}"), 0),  # Slack token
    (re.compile(r"(?i)\bhooks\.slack\.com/services/([A-Za-z0-9/_-]{10,200})"), 1),  # Slack webhook
    (re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), 0),  # npm
    (re.compile(r"\bpypi-[A-Za-z0-9_-]{40,300}"), 0),  # PyPI
    (re.compile(r"\blocal-[0-9a-f]{40}\b"), 0),  # W&B local key
    (re.compile(r"\beyJ[A-Za-z0-9_-]{5,4000}\.eyJ[A-Za-z0-9_-]{5,4000}\.[A-Za-z0-9_-]{0,4000}"), 0),  # JWT
    (
        re.compile(
            r"(?i)\b(?:wandb[_ -]?api[_ -]?key|wandb login(?: --relogin)?)[ \t]*[=: ][ \t]*[\"']?([0-9a-f]{40})\b"
        ),
        1,
    ),
    (
        re.compile(
            r"(?i)\baws_secret_access_key\b[ \t]*[\"']?[ \t]*[=:][ \t]*[\"']?([A-Za-z0-9/+=]{30,100})"
        ),
        1,
    ),
    (
        re.compile(
            r"(?i)\bauthorization[ \t]*[:=][ \t]*[\"']?(?:bearer|basic|token)[ \t]+([A-Za-z0-9_\-.~+/=]{1,4096})"
        ),
        1,
    ),
    (re.compile(r"(?i)\bbearer[ \t]+([A-Za-z0-9_\-.~+/]{16,4096}=*)"), 1),
    (
        re.compile(r"(?<![a-z0-9+.-])[a-z][a-z0-9+.-]{0,20}://([^\s:/@]{1,256}:[^\s/@]{1,256})@"),
        1,
    ),  # URL credentials
    (
        re.compile(
            r"(?i)[?&](?:sig|signature|x-amz-signature|x-goog-signature|sas_token|token)=([A-Za-z0-9%+/=_.-]{8,1024})"
        ),
        1,
    ),
    (
        re.compile(r"(?i)\b(?:AccountKey|SharedAccessKey)=([A-Za-z0-9+/=]{20,200})"),
        1,
    ),  # Azure connection string
    (
        re.compile(
            r"(?i)(?<![\w-])--?[a-z0-9_-]{0,30}(?:"
            + _KEYWORDS
            + r")[a-z0-9_-]{0,20}(?:=|[ \t]+)\"([^\"\n]{1,256})\""
        ),
        1,
    ),
    (
        re.compile(
            r"(?i)(?<![\w-])--?[a-z0-9_-]{0,30}(?:"
            + _KEYWORDS
            + r")[a-z0-9_-]{0,20}(?:=|[ \t]+)'([^'\n]{1,256})'"
        ),
        1,
    ),
    (
        re.compile(
            r"(?i)(?<![\w-])--?[a-z0-9_-]{0,30}(?:"
            + _KEYWORDS
            + r")[a-z0-9_-]{0,20}(?:=|[ \t]+)(?![\"'-])("
            + _SECRET_TOKEN
            + ")"
        ),
        1,
    ),
    (
        re.compile(
            r"(?i)\b[A-Z0-9_]{0,40}(?:PASSWORD|PASSWD|TOKEN|SECRET|API_KEY|APIKEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIALS)"
            r"[A-Z0-9_]{0,40}[ \t]*[\"']?[ \t]*[=:][ \t]*[\"']?(?![\"'])(" + _SECRET_TOKEN + ")"
        ),
        1,
    ),
    # A line that is only a long base64 run (the body of a PEM / OpenSSH private key block, a key dump).
    (
        re.compile(
            r"(?m)^(?:\[[^\]\n]{1,40}\]:? ?)?((?=[A-Za-z0-9+/]{0,80}[a-z])(?=[A-Za-z0-9+/]{0,80}[A-Z])"
            r"(?=[A-Za-z0-9+/]{0,80}\d)[A-Za-z0-9+/]{40,100}={0,2})[ \t]*$"
        ),
        1,
    ),
]
#: A line that names Weights & Biases (``wandb``, ``W&B``): every run of exactly 40 hex digits on it is an API
#: key, whatever quoting or syntax is around it (``os.environ["WANDB_API_KEY"] = "…"``, ``wandb.login(key=…)``,
#: ``WANDB_API_KEY=\"…\"`` inside JSON, ``machine api.wandb.ai … password …``, ``\x1b`` escapes before it).
_WANDB_WORD_RE = re.compile(r"(?i)wandb|w&b|weights\s?(?:&|and)\s?biases")
_HEX40_RE = re.compile(r"(?:(?<![0-9A-Fa-f])|(?<=\\x[0-9A-Fa-f]{2}))[0-9A-Fa-f]{40}(?![0-9A-Fa-f])")
#: A whole PEM / OpenSSH private key block (redact_dir sees whole files): the body becomes one pseudonym.
_KEY_BLOCK_RE = re.compile(
    r"(-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----)(.{1,20000}?)(-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----)",
    re.DOTALL,
)
_MAC_RE = re.compile(r"(?<![\w:.-])(?:[0-9A-Fa-f]{2}([:-]))(?:[0-9A-Fa-f]{2}\1){4}[0-9A-Fa-f]{2}(?![\w:-])")
#: InfiniBand GUIDs (``Port GUID: 0x0c42a10300b4c5d6``, ``node_guid 0c42:a103:00b4:c5d6``).
_GUID_RE = re.compile(
    r"(?i)\b(?:port|node|sys(?:tem)?[_ ]image|base)?[_ ]?guid\b[ \t:=]{0,4}"
    r"((?:0x)?[0-9a-f]{16}\b|(?:[0-9a-f]{4}:){3}[0-9a-f]{4}\b)"
)
#: Object-store buckets: s3://bucket, gs://bucket, https://bucket.s3.amazonaws.com, storage.googleapis.com/bucket.
_BUCKET_RES = [
    re.compile(r"(?i)\b(?:s3|s3a|s3n|gs|gcs|az|abfss?|wasbs?|oss|cos|r2)://([a-z0-9][a-z0-9._-]{1,62})"),
    re.compile(
        r"(?i)(?<![\w.-])([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])\.s3[.-](?:[a-z0-9-]{1,30}\.)?amazonaws\.com"
    ),
    re.compile(r"(?i)\bstorage\.(?:googleapis|cloud\.google)\.com/([a-z0-9][a-z0-9._-]{1,62})"),
]
#: Variables that name the user: the value is a user name, replaced and learned (then replaced where it stands alone).
_USER_VAR_RE = re.compile(
    r"\b(?:SLURM_JOB_USER|SLURM_USER|SBATCH_USER|USER|LOGNAME|USERNAME|SUDO_USER|PBS_O_LOGNAME"
    r"|LSB_USER|JOB_USER|user|username)[ \t]*[=:][ \t]*[\"']?(?P<user>[A-Za-z_][A-Za-z0-9_.-]{0,31})\b"
)
#: ``alice@login-3:~$``, ``[alice@gpu-login01 ~]$``: a shell prompt (user and host).
_PROMPT_RE = re.compile(
    r"(?<![\w.+@-])(?P<user>[a-z_][a-z0-9_-]{0,31})@(?P<host>[A-Za-z][A-Za-z0-9-]{0,62})(?=[:\s\]]|$)"
)
#: Slurm node lists: ``SLURM_JOB_NODELIST=gpu-node-[001-004,007],login2``.
_NODELIST_RE = re.compile(
    r"(?i)\b(?:SLURM_(?:JOB_|STEP_)?NODELIST|SLURM_NODENAME|SLURMD_NODENAME|NodeList|nodelist"
    r"|node_list|SLURM_SUBMIT_HOST|SLURM_LAUNCH_NODE_IPADDR)[ \t]*[=:][ \t]*[\"']?"
    r"(?P<list>[A-Za-z0-9][A-Za-z0-9._\-]{0,62}(?:\[[0-9,\-]{1,200}\])?(?:,[A-Za-z0-9][A-Za-z0-9._\-]{0,62}"
    r"(?:\[[0-9,\-]{1,200}\])?){0,100})"
)
_NODELIST_ITEM_RE = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._\-]{0,62})(?P<rng>\[[0-9,\-]{1,200}\])?")
#: Kubernetes pod names: ``pod/llm-train-7d9c8b7f6-x2k4q``, ``POD_NAME=llm-train-worker-0``.
_POD_RE = re.compile(
    r"(?i)(?:\bpods?/|\bpod[ \t]+|\b(?:KUBERNETES_)?POD_NAME[ \t]*[=:][ \t]*)(?P<host>[a-z0-9][a-z0-9-]{1,62})"
)
_POD_HASH_RE = re.compile(r"(?<![\w-])(?P<host>[a-z][a-z0-9-]{0,40}-[a-f0-9]{8,10}-[a-z0-9]{5})(?![\w-])")
_EMAIL_RE = re.compile(
    r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,10}\.[A-Za-z]{2,24}\b"
)
_USER_PATH_RE = re.compile(
    r"(?P<pre>(?:/home|/Users|/data|/scratch|/mnt/home|/usr/home|/work/home|/nfs/home|/fsx/home|/fsx/users"
    r"|/(?:lustre|gpfs|fs|nfs|p|cluster|shared)/[A-Za-z0-9_.-]{1,40}(?:/[A-Za-z0-9_.-]{1,40})?/(?:home|users|scratch|u))/"
    r"|[A-Za-z]:\\Users\\)"
    r"(?P<user>[A-Za-z0-9_.][A-Za-z0-9_.-]{0,63})(?=[/\\\s:'\")\],]|$)"
)
#: Users learned from these prefixes are also replaced where they stand alone.
_HOME_PREFIXES = ("/home/", "/Users/", "/usr/home/", "/mnt/home/")
_NOT_USERS = {
    "user",
    "users",
    "shared",
    "public",
    "common",
    "root",
    "ubuntu",
    "data",
    "local",
    "tmp",
    "lib",
    "bin",
    "opt",
    "share",
    "datasets",
    "models",
    "cache",
    "src",
    "home",
    "work",
    "scratch",
    "project",
    "projects",
    "group",
    "groups",
    "checkpoints",
    "logs",
    "venv",
    "conda",
    "miniconda3",
    "anaconda3",
}
_IPV4_RE = re.compile(
    r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?![\w]|\.\d)"
)
#: IPv6 (full, compressed, scoped ``fe80::1%eth0``), also right after an interface name (``eth0:fe80::1``):
#: candidates are checked by ``ipaddress``, so clock stamps and MACs are not taken for addresses.
_IPV6_RE = re.compile(
    r"(?<![\w.])(?<!::)(?=[0-9A-Fa-f:]{0,39}:[0-9A-Fa-f:]{0,39}:)(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:]|\.\d)"
)
_TLDS = (
    "com|net|org|edu|gov|io|ai|dev|cloud|internal|local|lan|corp|cluster|compute|intra|intranet|priv|"
    "private|de|uk|fr|cn|jp|us|ca|ch|nl|se|fi|kr|in|eu|au|sg|il|at|be|es|it|pl|ru|tw|br|example|test|localdomain"
)
_FQDN_RE = re.compile(
    r"(?:(?<=//)|(?<=>@)|(?<![\w.@/-]))(?P<host>[A-Za-z][A-Za-z0-9-]{0,62})(?P<dom>(?:\.[A-Za-z0-9-]{1,63}){0,12}\.(?:"
    + _TLDS
    + r"))(?![\w-]|\.[A-Za-z0-9])"
)
#: NCCL debug prefix ``host:pid:tid [cudaDev]`` (possibly after tee/transport prefixes).
_NCCL_HOST_RE = re.compile(
    r"(?:^|[\]:>] ?|\s)(?P<host>[A-Za-z][A-Za-z0-9.-]{0,253}):\d{1,10}:\d{1,10} \[\d{1,4}\] NCCL "
)
#: torchelastic failure summary ``host      : node-a.example.com`` and ``hostname: x`` / ``HOSTNAME=x`` lines.
_HOST_FIELD_RE = re.compile(
    r"(?i)\b(?:host|hostname|nodename|slurmd_nodename|master_addr|master[-_]address|rdzv[-_]endpoint"
    r"|rdzv[-_]host|endpoint|init[-_]method|store[-_]host|coordinator)(?:[ \t]*[:=][ \t]*|(?<=[a-z])(?<![ \t])[ \t]+(?=\S*[\d.-]))"
    r"(?:[a-z]{2,8}://)?\[?(?P<host>[A-Za-z][A-Za-z0-9.-]{0,253})"
)
#: Public domains kept as they are (documentation links, hubs): they say nothing about a site.
_PUBLIC_DOMAINS = {
    "pytorch.org",
    "github.com",
    "githubusercontent.com",
    "huggingface.co",
    "nvidia.com",
    "python.org",
    "pypi.org",
    "wandb.ai",
    "readthedocs.io",
    "docs.rs",
    "microsoft.com",
    "deepspeed.ai",
    "google.com",
    "googleapis.com",
    "amazonaws.com",
    "anaconda.org",
    "conda.io",
    "ubuntu.com",
    "debian.org",
    "kernel.org",
    "stackoverflow.com",
    "example.com",
    "example.org",
    "example.net",
}
_KEEP_HOSTS = {
    "localhost",
    "localhost.localdomain",
    "ip6-localhost",
    "none",
    "null",
    "unknown",
    "true",
    "false",
}
_PSEUDO_RE = re.compile(r"^(?:host|ip|user|email|domain|mac|bucket)-\d+$|^<secret-\d+>$")


def _keep_ip(text: str) -> bool:
    try:
        ip = ipaddress.ip_address(text.split("%")[0])
    except ValueError:
        return True  # not an address at all: leave it alone
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_unspecified


class Redactor:
    """Stable pseudonyms for one redaction run. Use one instance for everything that belongs together."""

    def __init__(self) -> None:
        self._maps: dict[str, dict[str, str]] = {
            k: {} for k in ("host", "ip", "user", "email", "secret", "domain", "mac", "bucket")
        }
        self._hosts: set[str] = set()  # lower case
        self._host_re: re.Pattern[str] | None = None
        self._users_bare: set[str] = set()
        self._user_re: re.Pattern[str] | None = None
        self.counts: dict[str, int] = {k: 0 for k in self._maps}

    # ---------------------------------------------------------------------------------- pseudonyms

    def pseudonym(self, kind: str, value: str) -> str:
        m = self._maps[kind]
        if kind in ("host", "domain", "email"):
            value = value.lower()  # DNS names are case-insensitive: NODE-A is node-a
        if value not in m:
            n = len(m) + 1
            m[value] = f"<secret-{n}>" if kind == "secret" else f"{kind}-{n}"
        self.counts[kind] += 1
        return m[value]

    @property
    def mapping(self) -> dict[str, dict[str, str]]:
        """kind -> {original: pseudonym}. Keep it private: it undoes the redaction."""
        return {k: dict(v) for k, v in self._maps.items()}

    # ------------------------------------------------------------------------------------ learning

    def learn_host(self, name: str | None) -> None:
        """Register a host name (short or FQDN); its short name is replaced wherever it stands alone."""
        if not name:
            return
        name = name.strip().strip(".")
        short = name.split(".")[0]
        if (
            len(short) < 2
            or short.lower() in _KEEP_HOSTS
            or _PSEUDO_RE.match(short)
            or short.isdigit()
            or not re.fullmatch(r"[A-Za-z][A-Za-z0-9-]*", short)
        ):
            return
        if short.lower() not in self._hosts:
            self._hosts.add(short.lower())
            self._host_re = None
            self.pseudonym("host", short)
            self.counts["host"] -= 1

    def learn_hosts(self, names: Iterable[str | None]) -> None:
        for n in sorted({n for n in names if n}):
            self.learn_host(n)

    def learn_text(self, text: str) -> None:
        """Learn host names (NCCL prefixes, ``host :`` fields) and user names (home paths) from ``text``, so
        that they are replaced where they stand alone even in text redacted before they were seen."""
        found = {m.group("host") for m in _NCCL_HOST_RE.finditer(text)}
        found |= {m.group("host") for m in _HOST_FIELD_RE.finditer(text)}
        found |= {m.group("host") for m in _PROMPT_RE.finditer(text)}
        found |= {m.group("host") for m in _POD_RE.finditer(text)}
        found |= {m.group("host") for m in _POD_HASH_RE.finditer(text)}
        for m in _NODELIST_RE.finditer(text):
            found |= set(_expand_nodelist(m.group("list")))
        if "attempt_" in text:
            found |= _run_dir_hosts(text)
        for h in sorted(found):
            if not _is_ipish(h):
                self.learn_host(h)
        for m in _USER_PATH_RE.finditer(text):
            if _bare_ok(m.group("pre")):
                self._learn_user(m.group("user"))
        for m in _PROMPT_RE.finditer(text):
            self._learn_user(m.group("user"))
        for m in _USER_VAR_RE.finditer(text):
            self._learn_user(m.group("user"))

    def _learn_user(self, user: str) -> None:
        if (
            len(user) >= 3
            and user.lower() not in _NOT_USERS
            and not _PSEUDO_RE.match(user)
            and user not in self._users_bare
        ):
            self._users_bare.add(user)
            self._user_re = None

    def learn_table(self, table: pl.DataFrame) -> None:
        """Learn host names from the event table: the ``host`` column and every string column's text."""
        if "host" in table.columns:
            self.learn_hosts(table["host"].drop_nulls().unique().to_list())
        for col in ("raw", "path"):
            if col in table.columns and table.height:
                for chunk in _chunks(table[col].drop_nulls().unique().to_list()):
                    self.learn_text("\n".join(chunk))

    # ----------------------------------------------------------------------------------- redaction

    def text(self, s: str) -> str:
        """Redact one string (any length, any number of lines)."""
        if not s:
            return s
        if "PRIVATE KEY-----" in s:
            s = _KEY_BLOCK_RE.sub(
                lambda m: m.group(1) + "\n" + self.pseudonym("secret", m.group(2)) + "\n" + m.group(3), s
            )
        s = self._secrets(s)
        for pat in _BUCKET_RES:
            s = pat.sub(
                functools.partial(_replace_group, g=1, fn=lambda v: self.pseudonym("bucket", v.lower())), s
            )
        s = _EMAIL_RE.sub(lambda m: self.pseudonym("email", m.group(0).lower()), s)
        s = _PROMPT_RE.sub(self._prompt, s)
        s = _USER_VAR_RE.sub(functools.partial(_replace_group, g=1, fn=self._user_value), s)
        s = _USER_PATH_RE.sub(self._user_path, s)
        if self._users_bare:
            if self._user_re is None:
                alts = "|".join(re.escape(u) for u in sorted(self._users_bare, key=len, reverse=True))
                self._user_re = re.compile(r"(?<![\w.-])(?:" + alts + r")(?![A-Za-z0-9-])")
            s = self._user_re.sub(lambda m: self.pseudonym("user", m.group(0)), s)
        s = _MAC_RE.sub(lambda m: self.pseudonym("mac", m.group(0).lower().replace("-", ":")), s)
        s = _GUID_RE.sub(functools.partial(_replace_group, g=1, fn=self._secret_value), s)
        s = _IPV6_RE.sub(self._ipv6, s)
        s = _IPV4_RE.sub(
            lambda m: m.group(0) if _keep_ip(m.group(0)) else self.pseudonym("ip", m.group(0)), s
        )
        s = _NODELIST_RE.sub(functools.partial(_replace_group, g=1, fn=self._nodelist), s)
        s = _FQDN_RE.sub(self._fqdn, s)
        if self._hosts:
            if self._host_re is None:
                alts = "|".join(re.escape(h) for h in sorted(self._hosts, key=len, reverse=True))
                # A host glued to a word by ``-`` or ``_`` is replaced too: torchrun log folders named after
                # the host (``torchrun_logs-node-a``, ``run-node-a_x7k2``, ``node-a_1234_x``).
                self._host_re = re.compile(
                    r"(?<![A-Za-z0-9])(?:" + alts + r")(?![A-Za-z0-9-])", re.IGNORECASE
                )
            s = self._host_re.sub(lambda m: self.pseudonym("host", m.group(0)), s)
        return s

    def _prompt(self, m: re.Match[str]) -> str:
        user, host = m.group("user"), m.group("host")
        if (
            user.lower() in _NOT_USERS
            or _PSEUDO_RE.match(user)
            or _PSEUDO_RE.match(host)
            or host.lower() in _KEEP_HOSTS
        ):
            return m.group(0)
        return self.pseudonym("user", user) + "@" + self.pseudonym("host", host)

    def _user_value(self, v: str) -> str:
        if v.lower() in _NOT_USERS or _PSEUDO_RE.match(v) or len(v) < 2:
            return v
        return self.pseudonym("user", v)

    def _nodelist(self, v: str) -> str:
        out = []
        for m in _NODELIST_ITEM_RE.finditer(v):
            name = m.group("name")
            if _PSEUDO_RE.match(name) or _is_ipish(name):
                out.append(m.group(0))
                continue
            out.append(self.pseudonym("host", name) + (m.group("rng") or ""))
        return ",".join(out)

    def __call__(self, s: str | None) -> str | None:
        return None if s is None else self.text(s)

    def _secrets(self, s: str) -> str:
        for pat, grp in _SECRET_PATTERNS:
            if grp == 0:
                s = pat.sub(self._whole_secret, s)
            else:
                s = pat.sub(functools.partial(_replace_group, g=grp, fn=self._secret_value), s)
        if _WANDB_WORD_RE.search(s):  # W&B keys: 40 hex digits on a line that names W&B
            s = "\n".join(
                _HEX40_RE.sub(self._whole_secret, line) if _WANDB_WORD_RE.search(line) else line
                for line in s.split("\n")
            )
        return s

    def _whole_secret(self, m: re.Match[str]) -> str:
        return self.pseudonym("secret", m.group(0))

    def _secret_value(self, v: str) -> str:
        if _PSEUDO_RE.match(v) or v.startswith("<secret-"):
            return v
        return self.pseudonym("secret", v)

    def _user_path(self, m: re.Match[str]) -> str:
        user = m.group("user")
        if user.lower() in _NOT_USERS or _PSEUDO_RE.match(user):
            return m.group(0)
        if _bare_ok(m.group("pre")):
            self._learn_user(user)
        return m.group("pre") + self.pseudonym("user", user)

    def _ipv6(self, m: re.Match[str]) -> str:
        text = m.group(0)
        try:
            ip = ipaddress.IPv6Address(text)
        except ValueError:
            return text
        if _keep_ip(text):
            return text
        if ip.ipv4_mapped is not None:
            return text  # the IPv4 part is redacted by the IPv4 pass: ::ffff:ip-1
        return self.pseudonym("ip", ip.compressed)

    def _fqdn(self, m: re.Match[str]) -> str:
        host, dom = m.group("host"), m.group("dom")
        full = m.group(0)
        if full.lower() in _KEEP_HOSTS or host.lower() in _KEEP_HOSTS or _PSEUDO_RE.match(host):
            return full
        if _looks_like_file(full):
            return full
        dom = dom.lstrip(".").lower()
        if host.lower() not in self._hosts and ".".join(full.lower().split(".")[-2:]) in _PUBLIC_DOMAINS:
            return full  # a public site (documentation link), not the cluster's
        # An FQDN is replaced whole; only names learned from strong evidence (the table's host column, NCCL
        # prefixes, host fields, file names) are also replaced where they stand alone.
        return self.pseudonym("host", host) + "." + self.pseudonym("domain", dom)


def _replace_group(m: re.Match[str], g: int, fn: Callable[[str], str]) -> str:
    start, end = m.span(g)
    base = m.start(0)
    whole = m.group(0)
    return whole[: start - base] + fn(m.group(g)) + whole[end - base :]


_FILE_EXT = re.compile(
    r"\.(?:py|log|txt|out|err|json|yaml|yml|toml|sh|gz|cpp|cc|h|hpp|so|pt|pth|bin|safetensors|"
    r"csv|parquet|md|ipynb|cfg|ini|lock|whl|tar)$",
    re.IGNORECASE,
)


def _looks_like_file(name: str) -> bool:
    return bool(_FILE_EXT.search(name))


def _bare_ok(pre: str) -> bool:
    """Users under these prefixes (``/home/``, ``/Users/``, ``…/users/``) are users for sure: replaced where
    they stand alone too (``/data/x`` and ``/scratch/x`` may be data set names)."""
    return pre in _HOME_PREFIXES or pre.lower().endswith(("/home/", "/users/", "/u/"))


def _expand_nodelist(spec: str, limit: int = 4096) -> list[str]:
    """``gpu-[01-03,7],login2`` -> ``gpu-01, gpu-02, gpu-03, gpu-7, login2`` (at most ``limit`` names)."""
    names: list[str] = []
    for m in _NODELIST_ITEM_RE.finditer(spec):
        name, rng = m.group("name"), m.group("rng")
        if not rng:
            names.append(name)
            continue
        for part in rng.strip("[]").split(","):
            lo, _, hi = part.partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()):
                continue
            a, b = int(lo), int(hi) if hi else int(lo)
            for i in range(a, min(b, a + limit) + 1):
                names.append(f"{name}{str(i).zfill(len(lo))}")
                if len(names) >= limit:
                    return names
    return names


#: A torchrun attempt folder in a path (``…/attempt_0/…``): the folders above it are the log and run folders.
_ATTEMPT_DIR_RE = re.compile(r"/attempt_\d{1,7}(?![\w.-])")
_PATH_CUT_RE = re.compile(r"[\s'\"=:(\[<>,;|`]")
#: ``<word>-<name>``: the name glued after the first ``-`` that a letter follows (``torchrun_logs-node-a``);
#: torchrun's ``_<random>`` run-folder suffix is not part of it.
_GLUED_RE = re.compile(r"-(?P<host>[A-Za-z][A-Za-z0-9.-]{0,253})(?:_[A-Za-z0-9_]{0,64})?\Z")


def _run_dir_hosts(text: str) -> set[str]:
    """Host names glued into torchrun log and run folder names: of the (up to 3) folders above each
    ``attempt_N`` folder in ``text``, those named ``<word>-<name>`` give ``<name>`` (``--log-dir
    torchrun_logs-$(hostname)``, ``--rdzv-id run-$(hostname)``). A name that is no host (``exp-bert``) is
    then replaced where it stands alone too: more redaction, never less."""
    out: set[str] = set()
    for m in _ATTEMPT_DIR_RE.finditer(text):
        before = _PATH_CUT_RE.split(text[max(0, m.start() - 1024) : m.start()])[-1]
        for folder in before.split("/")[-3:]:
            g = _GLUED_RE.search(folder)
            if g is not None:
                out.add(g.group("host").strip(".-"))
    return out


def _is_ipish(h: str) -> bool:
    return bool(re.fullmatch(r"[\d.]+", h))


def _chunks(values: list[str], size: int = 2000) -> Iterable[list[str]]:
    for i in range(0, len(values), size):
        yield values[i : i + size]


# ------------------------------------------------------------------------------------------------- table


def _redact_column(s: pl.Series, r: Redactor) -> pl.Series:
    uniq = s.drop_nulls().unique().to_list()
    if not uniq:
        return s
    m = {v: r.text(v) for v in uniq}
    changed = {k: v for k, v in m.items() if k != v}
    if not changed:
        return s
    return s.replace_strict(list(changed), list(changed.values()), default=s, return_dtype=pl.String)


def redact_table(table: pl.DataFrame, redactor: Redactor | None = None) -> pl.DataFrame:
    """Return ``table`` with every string column redacted (raw, message, host, path, peer_addr, …).

    Host names are learned from the table first, so a host named only in the ``host`` column or a file
    name is replaced wherever it appears.
    """
    r = redactor or Redactor()
    r.learn_table(table)
    cols = [c for c, t in table.schema.items() if t == pl.String]
    return table.with_columns([_redact_column(table[c], r).alias(c) for c in cols])


def _redact_path(p: Path | str, r: Redactor) -> str:
    return r.text(str(p))


def _redact_source(src: Source, r: Redactor) -> Source:
    return dataclasses.replace(
        src,
        path=Path(_redact_path(src.path, r)),
        rel=_redact_path(src.rel, r),
        host=r(src.host),
        node_key=r(src.node_key),
        notes=tuple(r.text(n) for n in src.notes),
    )


def redact_result(res: IngestResult, redactor: Redactor | None = None) -> IngestResult:
    """Redact an ingest result: the table (every string column), the warnings and the source paths."""
    r = redactor or Redactor()
    r.learn_hosts(s.host for s in res.sources)
    for s in res.sources:
        r.learn_text(s.rel)
    table = redact_table(res.table, r)
    return dataclasses.replace(
        res,
        table=table,
        sources=[_redact_source(s, r) for s in res.sources],
        warnings=[r.text(w) for w in res.warnings],
    )


# --------------------------------------------------------------------------------------------- directory


@dataclasses.dataclass
class RedactStats:
    """What :func:`redact_dir` did: files written, files skipped (binary/unreadable, not copied), lines,
    and replacements by kind (host, ip, user, email, secret, domain); ``distinct`` counts distinct values."""

    files: int = 0
    lines: int = 0
    skipped: list[str] = dataclasses.field(default_factory=list)
    replacements: dict[str, int] = dataclasses.field(default_factory=dict)
    distinct: dict[str, int] = dataclasses.field(default_factory=dict)


_COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".zstd")


def check_output_dir(src: Path, dst: Path) -> None:
    """Refuse an output folder that would overwrite or hold the input: ``dst`` equal to ``src`` (or, for a
    file, its folder), inside ``src``, a parent of ``src`` (the raw logs would sit in the "redacted"
    folder), or an existing folder that is not empty. Raises ``ValueError`` with the reason."""
    s, d = src.resolve(), dst.resolve()
    base = s.parent if src.is_file() else s
    if d == s or d == base:
        raise ValueError(
            f"{dst}: the output folder must not be the input folder (it would overwrite the originals)"
        )
    if d.is_relative_to(base):
        raise ValueError(f"{dst}: the output folder must not be inside {src}")
    if s.is_relative_to(d):
        raise ValueError(
            f"{dst}: the output folder must not hold the input {src} (the raw logs would be in the redacted copy)"
        )
    if d.exists() and not d.is_dir():
        raise ValueError(f"{dst}: exists and is not a directory")
    if d.is_dir() and any(d.iterdir()):
        raise ValueError(f"{dst}: the output folder is not empty; give a new or empty folder")


def _out_rel(rel: str, r: Redactor) -> str:
    """The redacted relative path, one component at a time (a secret pattern never eats a ``/``); a
    compressed file's suffix becomes ``.gz`` (the copy is written gzip-compressed)."""
    parts = [r.text(p) for p in rel.split("/")]
    name = parts[-1]
    for suf in _COMPRESSED_SUFFIXES[1:]:
        if name.endswith(suf):
            name = name[: -len(suf)] + ".gz"
    parts[-1] = name
    return "/".join(p.replace("/", "_") for p in parts)


def redact_dir(
    src: str | os.PathLike[str], dst: str | os.PathLike[str], redactor: Redactor | None = None
) -> RedactStats:
    """Write a redacted copy of the log directory (or file) ``src`` to ``dst`` (same relative layout; file
    and folder names redacted too). Files are read as ingest reads them (:func:`correlator.read.read_lines`:
    decompressed, decoded, control characters escaped, within the same limits), redacted line by line and
    written as UTF-8 text, compressed files gzip-compressed. What was not read (binary, FIFOs, symlinks
    out of ``src``, parts past a cap) is not copied and is listed in ``stats.skipped``; where a cap left the
    middle of a file out, its copy holds one line that says which lines (:data:`GAP_LINE`). The copy is built
    under a temporary name next to ``dst`` and renamed at the end: an error leaves no partial copy.

    Raises :class:`correlator.discover.DiscoveryError` when ``src`` is missing or empty, ``ValueError`` when
    ``dst`` would overwrite or hold the input (see :func:`check_output_dir`).
    """
    import shutil
    import tempfile

    from correlator.discover import discover
    from correlator.read import read_lines
    from correlator.smallfile import read_small_lines

    srcp, dstp = Path(src), Path(dst)
    check_output_dir(srcp, dstp)
    r = redactor or Redactor()
    sources, warnings = discover(srcp)
    stats = RedactStats()
    texts: list[tuple[Source, list[str], bool, int]] = []
    skipped: list[tuple[str, str]] = [(str(e["path"]), str(e["reason"])) for e in _skip_notes(warnings)]
    for s in sources:
        # An error.json is read as ingest reads it: within the small-file limit (its head when larger).
        res = read_small_lines(s.path, s.rel)[0] if s.layout == "error_json" else read_lines(s.path, s.rel)
        for e in res.skipped:
            if e["reason"] != "line truncated":
                skipped.append((s.rel, f"{e['reason']}, not copied"))
        if not res.lines.len():
            continue
        texts.append((s, _with_gaps(res), s.path.name.endswith(_COMPRESSED_SUFFIXES), res.lines.len()))
    # Learn every host first, so that numbering does not depend on file order and a host named late in
    # one file is replaced in the files read before it.
    r.learn_hosts(s.host for s, _, _, _ in texts)
    for s, lines, _, _ in texts:
        r.learn_text(s.rel)
        for chunk in _chunks(lines):
            r.learn_text("\n".join(chunk))
    dstp.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dstp.name}.", suffix=".partial", dir=dstp.parent))
    try:
        used: dict[str, str] = {}
        for s, lines, gz, kept in texts:
            rel = _out_rel(s.rel, r)
            if rel.lower() in used:  # two names that map to one pseudonym: keep both files
                stem, dot, ext = rel.partition(".")
                k = 2
                while f"{stem}~{k}{dot}{ext}".lower() in used:
                    k += 1
                rel = f"{stem}~{k}{dot}{ext}"
            used[rel.lower()] = s.rel
            out = tmp / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            body = _redact_lines(lines, r)
            data = ("\n".join(body) + "\n").encode("utf-8", errors="surrogateescape")
            out.write_bytes(gzip.compress(data, mtime=0) if gz else data)
            try:
                st = s.path.stat()
                os.utime(out, (st.st_atime, st.st_mtime))  # ingest takes the year of c10 stamps from mtimes
            except OSError:
                pass
            stats.files += 1
            stats.lines += kept
        if dstp.is_dir():
            dstp.rmdir()  # empty (checked above)
        os.replace(tmp, dstp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    stats.skipped = [f"{_out_rel(rel, r)}: {why}" for rel, why in skipped]
    stats.replacements = dict(r.counts)
    stats.distinct = {k: len(v) for k, v in r.mapping.items()}
    return stats


#: The line a redacted copy holds where a cap left lines of the file out (:meth:`ReadResult.parts`): the copy says
#: what is missing, and which lines of the original its neighbours are.
GAP_LINE = "[rankscope redact: lines {a}-{b} of the original ({n} lines) left out by a cap, not copied]"


def _with_gaps(res: ReadResult) -> list[str]:
    """The lines of ``res``, a :class:`GAP_LINE` where its line numbers jump (a file past a cap kept its head
    and its tail)."""
    out: list[str] = []
    nxt = 1
    for first, run in res.parts():
        if first > nxt:
            out.append(GAP_LINE.format(a=nxt, b=first - 1, n=first - nxt))
        out += run if isinstance(run, list) else run.to_list()
        nxt = first + len(run)
    return out


def _skip_notes(warnings: list[str]) -> list[dict[str, object]]:
    from correlator.discover import skipped_entries

    return skipped_entries(warnings)


def _redact_lines(lines: list[str], r: Redactor) -> list[str]:
    """Redact lines in blocks (fewer regex calls than line by line); a private key block spanning lines
    becomes its BEGIN and END lines around one pseudonym."""
    out: list[str] = []
    in_key = False
    for chunk in _chunks(lines, 500):
        text = "\n".join(chunk)
        if "PRIVATE KEY-----" in text or in_key:
            for line in chunk:
                if "-----BEGIN" in line and "PRIVATE KEY-----" in line:
                    in_key = True
                    out.append(line)
                    continue
                if in_key:
                    if "-----END" in line:
                        in_key = False
                        out.append(line)
                    else:
                        out.append(r.pseudonym("secret", line.strip()))
                    continue
                out.append(r.text(line))
            continue
        out.extend(r.text(text).split("\n"))
    return out


__all__ = ["RedactStats", "Redactor", "redact_dir", "redact_result", "redact_table"]
