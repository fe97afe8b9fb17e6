"""Redaction: replace host names, IP addresses, user names, e-mail addresses and secrets by stable pseudonyms.

Logs of a failed job are often shared (tickets, issues, vendors) and carry what should not travel: host names
and IPs of the cluster, the user's name in paths, e-mail addresses, and sometimes tokens printed by a
launcher or an ``env`` dump. A :class:`Redactor` replaces each distinct value by a pseudonym that is stable
for the life of the redactor: the same host is ``host-1`` in every file, every column, every warning.

What is replaced (in this order, so that a secret or e-mail is never half-redacted as a host):

1. secrets -> ``<secret-N>``: Hugging Face ``hf_…`` tokens, W&B API keys (40 hex digits after
   ``WANDB_API_KEY``/``wandb login``, and ``local-…`` keys), AWS access key ids (``AKIA…``/``ASIA…``) and
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
   (``node-a.rank3.err``), and FQDNs with a known top-level domain. A fully qualified name keeps its shape:
   ``node-a.cluster.example.com`` -> ``host-1.domain-1``, so its short name is the pseudonym of ``node-a``
   everywhere. ``localhost`` is kept.

Same input, same pseudonym: one :class:`Redactor` is used across all files, columns and warnings of one
run, so rank identity that rests on host names (NCCL ``host:pid`` prefixes, per-host files) is preserved
and diagnosing the redacted copy names the same ranks as the original.

API: :func:`redact_table`, :func:`redact_result` (what ``--redact`` calls), :func:`redact_dir` (a redacted
copy of a log directory, file names included) and :func:`register`, which adds
``rankscope redact DIR -o OUT_DIR``.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import ipaddress
import os
import re
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:  # pragma: no cover
    from correlator.discover import Source
    from correlator.ingest import IngestResult

# ---------------------------------------------------------------------------------------------- patterns

_SECRET_TOKEN = r"[A-Za-z0-9_\-./+=~:]{4,}"
#: (pattern, group holding the secret: 0 = whole match).
_SECRET_PATTERNS: list[tuple[re.Pattern[str], int]] = [
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"), 0),
    (re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}\b"), 0),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b"), 0),
    (re.compile(r"\b(?:AKIA|ASIA|AROA|AIDA)[A-Z0-9]{16}\b"), 0),
    (re.compile(r"\blocal-[0-9a-f]{40}\b"), 0),
    (re.compile(r"(?i)\b(?:wandb[_ -]?api[_ -]?key|wandb login(?: --relogin)?)\s*[=: ]\s*[\"']?([0-9a-f]{40})\b"), 1),
    (re.compile(r"(?i)\baws_secret_access_key\b\s*[\"']?\s*[=:]\s*[\"']?([A-Za-z0-9/+=]{30,})"), 1),
    (re.compile(r"(?i)\bauthorization\s*[:=]\s*[\"']?(?:bearer|basic|token)\s+([A-Za-z0-9_\-.~+/=]+)"), 1),
    (re.compile(r"(?i)\bbearer\s+([A-Za-z0-9_\-.~+/]{16,}=*)"), 1),
    (re.compile(r"\b[a-z][a-z0-9+.-]*://([^\s:/@]+:[^\s/@]+)@"), 1),
    (re.compile(r"(?i)(?<![\w-])--?(?:password|passwd|pwd|token|auth[-_]?token|access[-_]?token|api[-_]?key|apikey"
                r"|secret|secret[-_]?key|access[-_]?key|hf[-_]?token|wandb[-_]?key|private[-_]?key)(?:=|\s+)[\"']?("
                + _SECRET_TOKEN + ")"), 1),
    (re.compile(r"(?i)\b[A-Z0-9_]*(?:PASSWORD|PASSWD|TOKEN|SECRET|API_KEY|APIKEY|ACCESS_KEY|PRIVATE_KEY)[A-Z0-9_]*"
                r"\s*[\"']?\s*[=:]\s*[\"']?(" + _SECRET_TOKEN + ")"), 1),
]
_EMAIL_RE = re.compile(r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_USER_PATH_RE = re.compile(r"(?P<pre>(?:/home|/Users|/data|/scratch|/mnt/home|/usr/home|/work/home)/|[A-Za-z]:\\Users\\)"
                           r"(?P<user>[A-Za-z0-9_.][A-Za-z0-9_.-]*)(?=[/\\\s:'\")\],]|$)")
#: Users learned from these prefixes are also replaced where they stand alone.
_HOME_PREFIXES = ("/home/", "/Users/", "/usr/home/", "/mnt/home/")
_NOT_USERS = {"user", "users", "shared", "public", "common", "root", "ubuntu", "data", "local", "tmp", "lib",
              "bin", "opt", "share", "datasets", "models", "cache", "src", "home", "work", "scratch", "project",
              "projects", "group", "groups", "checkpoints", "logs", "venv", "conda", "miniconda3", "anaconda3"}
_IPV4_RE = re.compile(r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?![\w]|\.\d)")
_IPV6_RE = re.compile(r"(?<![\w:.])(?=[0-9A-Fa-f:]*:[0-9A-Fa-f:]*:)(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:]|\.\d)")
_TLDS = ("com|net|org|edu|gov|io|ai|dev|cloud|internal|local|lan|corp|cluster|compute|intra|intranet|priv|"
         "private|de|uk|fr|cn|jp|us|ca|ch|nl|se|fi|kr|in|eu|au|sg|il|at|be|es|it|pl|ru|tw|br|example|test|localdomain")
_FQDN_RE = re.compile(r"(?:(?<=//)|(?<=>@)|(?<![\w.@/-]))(?P<host>[A-Za-z][A-Za-z0-9-]{0,62})(?P<dom>(?:\.[A-Za-z0-9-]{1,63})*\.(?:" + _TLDS
                      + r"))(?![\w-]|\.[A-Za-z0-9])")
#: NCCL debug prefix ``host:pid:tid [cudaDev]`` (possibly after tee/transport prefixes).
_NCCL_HOST_RE = re.compile(r"(?:^|[\]:>] ?|\s)(?P<host>[A-Za-z][A-Za-z0-9.-]*):\d+:\d+ \[\d+\] NCCL ")
#: torchelastic failure summary ``host      : node-a.example.com`` and ``hostname: x`` / ``HOSTNAME=x`` lines.
_HOST_FIELD_RE = re.compile(r"(?i)\b(?:host|hostname|nodename|slurmd_nodename|master_addr)\s*[:=]\s*(?P<host>[A-Za-z][A-Za-z0-9.-]*)")
#: Public domains kept as they are (documentation links, hubs): they say nothing about a site.
_PUBLIC_DOMAINS = {"pytorch.org", "github.com", "githubusercontent.com", "huggingface.co", "nvidia.com", "python.org",
                   "pypi.org", "wandb.ai", "readthedocs.io", "docs.rs", "microsoft.com", "deepspeed.ai", "google.com",
                   "googleapis.com", "amazonaws.com", "anaconda.org", "conda.io", "ubuntu.com", "debian.org",
                   "kernel.org", "stackoverflow.com", "example.com", "example.org", "example.net"}
_KEEP_HOSTS = {"localhost", "localhost.localdomain", "ip6-localhost", "none", "null", "unknown", "true", "false"}
_PSEUDO_RE = re.compile(r"^(?:host|ip|user|email|domain)-\d+$|^<secret-\d+>$")


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
        self._maps: dict[str, dict[str, str]] = {k: {} for k in ("host", "ip", "user", "email", "secret", "domain")}
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
        if (len(short) < 2 or short.lower() in _KEEP_HOSTS or _PSEUDO_RE.match(short) or short.isdigit()
                or not re.fullmatch(r"[A-Za-z][A-Za-z0-9-]*", short)):
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
        for h in sorted(found):
            if not _is_ipish(h):
                self.learn_host(h)
        for m in _USER_PATH_RE.finditer(text):
            user = m.group("user")
            if (m.group("pre") in _HOME_PREFIXES and len(user) >= 3 and user.lower() not in _NOT_USERS
                    and not _PSEUDO_RE.match(user) and user not in self._users_bare):
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
        s = self._secrets(s)
        s = _EMAIL_RE.sub(lambda m: self.pseudonym("email", m.group(0).lower()), s)
        s = _USER_PATH_RE.sub(self._user_path, s)
        if self._users_bare:
            if self._user_re is None:
                alts = "|".join(re.escape(u) for u in sorted(self._users_bare, key=len, reverse=True))
                self._user_re = re.compile(r"(?<![\w.-])(?:" + alts + r")(?![\w-])")
            s = self._user_re.sub(lambda m: self.pseudonym("user", m.group(0)), s)
        s = _IPV6_RE.sub(self._ipv6, s)
        s = _IPV4_RE.sub(lambda m: m.group(0) if _keep_ip(m.group(0)) else self.pseudonym("ip", m.group(0)), s)
        s = _FQDN_RE.sub(self._fqdn, s)
        if self._hosts:
            if self._host_re is None:
                alts = "|".join(re.escape(h) for h in sorted(self._hosts, key=len, reverse=True))
                self._host_re = re.compile(r"(?<![\w-])(?:" + alts + r")(?![\w-])", re.IGNORECASE)
            s = self._host_re.sub(lambda m: self.pseudonym("host", m.group(0)), s)
        return s

    def __call__(self, s: str | None) -> str | None:
        return None if s is None else self.text(s)

    def _secrets(self, s: str) -> str:
        for pat, grp in _SECRET_PATTERNS:
            if grp == 0:
                s = pat.sub(self._whole_secret, s)
            else:
                s = pat.sub(functools.partial(_replace_group, g=grp, fn=self._secret_value), s)
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
        if m.group("pre") in _HOME_PREFIXES and len(user) >= 3 and user not in self._users_bare:
            self._users_bare.add(user)
            self._user_re = None
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
    return whole[: start - base] + fn(m.group(g)) + whole[end - base:]


_FILE_EXT = re.compile(r"\.(?:py|log|txt|out|err|json|yaml|yml|toml|sh|gz|cpp|cc|h|hpp|so|pt|pth|bin|safetensors|"
                       r"csv|parquet|md|ipynb|cfg|ini|lock|whl|tar)$", re.IGNORECASE)


def _looks_like_file(name: str) -> bool:
    return bool(_FILE_EXT.search(name))


def _is_ipish(h: str) -> bool:
    return bool(re.fullmatch(r"[\d.]+", h))


def _chunks(values: list[str], size: int = 2000) -> Iterable[list[str]]:
    for i in range(0, len(values), size):
        yield values[i: i + size]


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
        src, path=Path(_redact_path(src.path, r)), rel=_redact_path(src.rel, r), host=r(src.host),
        node_key=r(src.node_key), notes=tuple(r.text(n) for n in src.notes),
    )


def redact_result(res: IngestResult, redactor: Redactor | None = None) -> IngestResult:
    """Redact an ingest result: the table (every string column), the warnings and the source paths."""
    r = redactor or Redactor()
    r.learn_hosts(s.host for s in res.sources)
    for s in res.sources:
        r.learn_text(s.rel)
    table = redact_table(res.table, r)
    return dataclasses.replace(
        res, table=table, sources=[_redact_source(s, r) for s in res.sources],
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


def _read_bytes(path: Path) -> tuple[bytes, bool]:
    data = path.read_bytes()
    if path.name.endswith(".gz") and data[:2] == b"\x1f\x8b":
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out = d.decompress(data) + d.flush()
        except zlib.error:
            out = d.flush()
        return out, True
    return data, False


def redact_dir(src: str | os.PathLike[str], dst: str | os.PathLike[str], redactor: Redactor | None = None) -> RedactStats:
    """Write a redacted copy of the log directory ``src`` to ``dst`` (same relative layout; file and folder
    names redacted too). ``.gz`` files stay gzip-compressed; bytes that are not UTF-8 survive unchanged.
    Binary and unreadable files are not copied (listed in ``stats.skipped``): they cannot be redacted.

    Raises :class:`correlator.discover.DiscoveryError` when ``src`` is missing or empty, ``ValueError`` when
    ``dst`` lies inside ``src``.
    """
    from correlator.discover import discover
    from correlator.read import _looks_binary

    srcp, dstp = Path(src), Path(dst)
    if srcp.is_dir() and dstp.resolve().is_relative_to(srcp.resolve()):
        raise ValueError(f"{dst}: the output folder must not be inside {src}")
    r = redactor or Redactor()
    sources, _warnings = discover(srcp)
    stats = RedactStats()
    texts: list[tuple[Source, str, bool]] = []
    skipped: list[tuple[str, str]] = []
    for s in sources:
        try:
            data, gz = _read_bytes(s.path)
        except OSError as e:
            skipped.append((s.rel, f"cannot read ({e.strerror or e})"))
            continue
        if _looks_binary(data):
            skipped.append((s.rel, "binary content, not copied"))
            continue
        texts.append((s, data.decode("utf-8", errors="surrogateescape"), gz))
    # Learn every host first, so that numbering does not depend on file order and a host named late in
    # one file is replaced in the files read before it.
    r.learn_hosts(s.host for s, _, _ in texts)
    for s, text, _ in texts:
        r.learn_text(s.rel)
        r.learn_text(text)
    for s, text, gz in texts:
        out = dstp / r.text(s.rel)
        out.parent.mkdir(parents=True, exist_ok=True)
        data = r.text(text).encode("utf-8", errors="surrogateescape")
        out.write_bytes(gzip.compress(data, mtime=0) if gz else data)
        try:
            st = s.path.stat()
            os.utime(out, (st.st_atime, st.st_mtime))  # ingest takes the year of c10 stamps from mtimes
        except OSError:
            pass
        stats.files += 1
        stats.lines += text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    stats.skipped = [f"{r.text(rel)}: {why}" for rel, why in skipped]
    stats.replacements = dict(r.counts)
    stats.distinct = {k: len(v) for k, v in r.mapping.items()}
    return stats


# ---------------------------------------------------------------------------------------------- command


def register(app) -> None:  # type: ignore[no-untyped-def]
    """Add ``rankscope redact DIR -o OUT_DIR`` to the typer ``app``."""
    from typing import Annotated

    import typer

    def redact(directory: Path, output: Path, quiet: bool = False) -> None:
        """Write a copy of the logs with host names, IPs, user names, e-mails and secrets replaced by stable
        pseudonyms (host-1, ip-3, user-1, <secret-1>); diagnosing the copy names the same ranks."""
        from correlator.cli import UsageError, err

        if not directory.exists():
            raise UsageError(f"{directory}: no such file or directory")
        if output.exists() and not output.is_dir():
            raise UsageError(f"{output}: exists and is not a directory")
        try:
            stats = redact_dir(directory, output)
        except ValueError as e:
            raise UsageError(str(e))
        except OSError as e:
            raise UsageError(f"{output}: cannot write ({e.strerror or e})")
        if not quiet:
            for w in stats.skipped:
                err.print(f"[yellow]warning:[/] {w}", highlight=False, soft_wrap=True)
            kinds = ", ".join(f"{k} {v}" for k, v in stats.distinct.items() if v)
            err.print(f"wrote {stats.files} files ({stats.lines} lines) to {output}; replaced: {kinds or 'nothing'}",
                      highlight=False, soft_wrap=True)

    # typer reads the annotations; this module postpones them (strings), so hand it the real objects.
    redact.__annotations__ = {
        "directory": Annotated[Path, typer.Argument(help="Directory (or single file) of logs to redact.", show_default=False)],
        "output": Annotated[Path, typer.Option("--output", "-o", help="Folder to write the redacted copy to.")],
        "quiet": Annotated[bool, typer.Option("--quiet", "-q", help="No summary on stderr.")],
        "return": None,
    }
    app.command(name="redact")(redact)


__all__ = ["RedactStats", "Redactor", "redact_dir", "redact_result", "redact_table", "register"]
