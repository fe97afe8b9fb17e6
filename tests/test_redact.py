"""Redaction (issue 6): nothing sensitive survives in any output, and the diagnosis is unchanged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import networkx as nx
import polars as pl
import pytest

from correlator.diagnose import diagnose
from correlator.ingest import ingest
from correlator.redact import Redactor, redact_dir, redact_result, redact_table
from tests.conftest import run_cli

CASES = Path(__file__).resolve().parent.parent / "fixtures" / "cases"
REAL = sorted(p for p in CASES.iterdir() if p.name.startswith(("gloo-", "public-")))

SECRETS = {
    "hf": "hf_Zx8vQw2LmN4pR6tY0uI3oP5aS7dF9gH1jK",
    "wandb": "3f9a1c7e5b2d4f6a8c0e1b3d5f7a9c2e4b6d8f01",
    "aws_id": "AKIAZQ4EXAMPLE7XK2PA",
    "aws_secret": "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",
    "ghp": "ghp_R2d2C3p0Bb8Ll4Kk6Jj0Hh2Gg4Ff6Ee8Dd0Cc",
    "gho": "gho_M1n2B3v4C5x6Z7l8K9j0H1g2F3d4S5a6P7o8",
    "github_pat": "github_pat_11AQWERTY0abcdefghijk_LmNoPqRsTuVwXyZ0123456789abcdefghijklmnopqrstu",
    "bearer": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ0cmFpbiJ9.Qm9ndXNTaWduYXR1cmU",
    "password": "Tr0ub4dor&3-horse",
    "token_arg": "tkn-7781-velvet-otter",
    "url_pw": "s3cr3tPassw0rd",
}
HOSTS = ["node-a", "node-b", "trn-node-17", "gpu-host-3", "acme-research", "login7"]
IPS = ["10.23.4.5", "172.16.9.200", "198.51.100.77", "2001:db8:85a3::8a2e:370:7334", "fd12:3456:789a::42"]
USERS = ["alice", "bobby", "carol", "dmitri"]
EMAILS = ["alice.smith@acme-research.net", "ops+alerts@gpu-cloud.io"]
NEEDLES = [*SECRETS.values(), *HOSTS, *IPS, *USERS, *EMAILS]

INJECT = f"""\
[rank0]:[W1129 23:08:30.100000000 ProcessGroupNCCL.cpp:100] login from alice.smith@acme-research.net on gpu-host-3.acme-research.net (10.23.4.5)
export HF_TOKEN={SECRETS["hf"]} WANDB_API_KEY={SECRETS["wandb"]}
AWS_ACCESS_KEY_ID={SECRETS["aws_id"]} aws_secret_access_key={SECRETS["aws_secret"]}
git clone https://{SECRETS["ghp"]}@github.com/acme/train && gh auth login --with-token {SECRETS["gho"]}
GITHUB_TOKEN={SECRETS["github_pat"]}
curl -H "Authorization: Bearer {SECRETS["bearer"]}" https://deploy:{SECRETS["url_pw"]}@registry.acme-research.net/v2/
python /home/alice/proj/train.py --password={SECRETS["password"]} --token {SECRETS["token_arg"]} --data /data/carol/shards
  File "/Users/bobby/src/model.py", line 12, in forward
cache at /scratch/dmitri/hf; USER=alice; notify ops+alerts@gpu-cloud.io
trn-node-17:4242:4300 [0] NCCL INFO NET/Socket : Using [0]eth0:172.16.9.200<0> [1]ib0:[2001:db8:85a3::8a2e:370:7334]<0>
master at 198.51.100.77:29500 peer [fd12:3456:789a::42]:29400 hostname: login7 loopback 127.0.0.1 ::1
"""


def seed_corpus(dst: Path) -> Path:
    """gloo-01 (torchrun layout) + public-02 (two named hosts) + injected secrets, hosts, IPs, users, e-mails."""
    root = dst / "logs"
    shutil.copytree(next(CASES.glob("gloo-01-*")) / "logs", root / "gloo")
    shutil.copytree(next(CASES.glob("public-02-*")) / "logs", root / "multinode")
    stderr0 = next(root.glob("gloo/torchrun_logs/*/attempt_0/0/stderr.log"))
    stderr0.write_text(INJECT + stderr0.read_text())
    launcher = root / "gloo" / "launcher.log"
    launcher.write_text(launcher.read_text() + INJECT)
    # a file named after a host, with a truncated last line: its warning must be redacted too
    (root / "multinode" / "trn-node-17.rank9.log").write_text("[rank9]: epoch 1 on trn-node-17 at 10.23.4.5")
    return root


def leaks(text: str) -> list[str]:
    low = text.lower()
    return [n for n in NEEDLES if n.lower() in low]


run = run_cli


def verdict(table: pl.DataFrame) -> tuple[list[int], list[int], str]:
    j = diagnose(table).to_json()
    return j["initiating_ranks"], j["collateral_ranks"], j["failure_kind"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return seed_corpus(tmp_path_factory.mktemp("redact"))


def test_corpus_really_holds_the_needles(corpus):
    text = "\n".join(p.read_text(errors="replace") for p in corpus.rglob("*") if p.is_file())
    assert set(leaks(text)) == set(NEEDLES)


def test_nothing_survives_in_any_output(corpus, tmp_path, monkeypatch, capsys):
    outputs: dict[str, str] = {}
    pq = tmp_path / "t.parquet"
    code, _, e = run(["timeline", corpus, "-o", pq, "--redact"], monkeypatch, capsys)
    assert code == 0, e
    t = pl.read_parquet(pq)
    for c, dt in t.schema.items():
        if dt == pl.String:
            outputs[f"parquet:{c}"] = "\n".join(t[c].drop_nulls().to_list())
    outputs["timeline stderr"] = e
    for fmt in ("json", "markdown", "text"):
        code, o, e = run(["diagnose", corpus, "-f", fmt, "--redact"], monkeypatch, capsys)
        assert code == 0, e
        outputs[f"diagnose {fmt}"] = o + e
        if fmt == "json":
            json.loads(o)
    gml = tmp_path / "g.graphml"
    code, _, e = run(["graph", corpus, "-o", gml, "--redact"], monkeypatch, capsys)
    assert code == 0, e
    outputs["graphml"] = gml.read_text() + e
    nx.read_graphml(gml)
    code, o, e = run(["events", corpus, "-f", "json", "-n", "0", "--redact"], monkeypatch, capsys)
    assert code == 0, e
    outputs["events json"] = o + e
    assert len(o.splitlines()) > 300
    out_dir = tmp_path / "copy"
    code, o, e = run(["redact", corpus, "-o", out_dir], monkeypatch, capsys)
    assert code == 0, e
    outputs["redact stdout/stderr"] = o + e
    for p in out_dir.rglob("*"):
        outputs[f"copy name {p.relative_to(out_dir)}"] = str(p.relative_to(out_dir))
        if p.is_file():
            outputs[f"copy {p.relative_to(out_dir)}"] = p.read_text(errors="replace")
    bad = {k: leaks(v) for k, v in outputs.items() if leaks(v)}
    assert not bad, bad
    # the pseudonyms are there, the structure too
    joined = "\n".join(outputs.values())
    for pseudo in ("host-1", "ip-1", "user-1", "email-1", "<secret-1>"):
        assert pseudo in joined, pseudo
    assert (
        "127.0.0.1" in outputs["parquet:raw"] and "::1" in outputs["parquet:raw"]
    )  # loopback kept (documented)


def test_redacted_copy_keeps_layout_and_lines(corpus, tmp_path):
    out = tmp_path / "copy"
    stats = redact_dir(corpus, out)
    src_files = sorted(p for p in corpus.rglob("*") if p.is_file())
    dst_files = sorted(p for p in out.rglob("*") if p.is_file())
    assert stats.files == len(src_files) == len(dst_files)
    names = {p.relative_to(out).as_posix() for p in dst_files}
    assert any(n.startswith("gloo/torchrun_logs/") and "/attempt_0/0/stderr.log" in n for n in names)
    assert {"multinode/host-1.combined.log", "multinode/host-2.combined.log"} <= names, names
    a, b = ingest(corpus), ingest(out)
    assert a.lines_read == b.lines_read
    assert verdict(a.table) == verdict(b.table)
    assert stats.distinct["secret"] >= len(SECRETS) - 1 and stats.distinct["host"] >= 4


def test_same_value_same_pseudonym_everywhere(corpus):
    res = redact_result(ingest(corpus))
    t = res.table
    hosts = set(t["host"].drop_nulls().unique().to_list())
    assert hosts and all(h.startswith("host-") for h in hosts), hosts
    # node-a's pseudonym in the host column is the one in the NCCL prefixes of raw lines and in file names
    a_rows = t.filter(pl.col("raw").str.contains(r"^host-\d+:15325:16199 "))
    assert a_rows.height and a_rows["host"].unique().len() == 1
    h = a_rows["host"][0]
    assert a_rows["raw"][0].startswith(h + ":") and a_rows["path"][0] == f"multinode/{h}.combined.log"
    assert all(not leaks(w) for w in res.warnings), res.warnings
    assert any("host-" in w and "no newline" in w for w in res.warnings), res.warnings
    assert all(not leaks(str(s.path)) and not leaks(s.rel) for s in res.sources)


@pytest.mark.parametrize("case", REAL, ids=[p.name for p in REAL])
def test_real_fixture_same_verdict(case, tmp_path):
    res = ingest(case / "logs")
    want = verdict(res.table)
    assert verdict(redact_result(res).table) == want
    redact_dir(case / "logs", tmp_path / "copy")
    assert verdict(ingest(tmp_path / "copy").table) == want


def test_redactor_units():
    r = Redactor()
    r.learn_host("node-a")
    assert (
        r.text("node-a:1:2 [0] NCCL INFO x node-a.corp.acme.com")
        == "host-1:1:2 [0] NCCL INFO x host-1.domain-1"
    )
    assert r.text("10.0.0.1 then 10.0.0.2 then 10.0.0.1") == "ip-1 then ip-2 then ip-1"
    assert r.text("NODE-A and Node-A.Corp.Acme.com") == "host-1 and host-1.domain-1"  # DNS ignores case
    assert (
        r.text("[::ffff:10.0.0.2]:29500 [::ffff:127.0.0.1]:1 0.0.0.0 ::")
        == "[::ffff:ip-2]:29500 [::ffff:127.0.0.1]:1 0.0.0.0 ::"
    )
    # not addresses: versions, timestamps, c10 stamps (MAC addresses are redacted: see test_hostile_redact)
    for keep in (
        "NCCL version 2.21.5+cuda12.4",
        "[I1129 23:08:34.917299611 x.cpp:1]",
        "torch.distributed.elastic.multiprocessing.api",
        "see https://pytorch.org/docs/stable/x.html",
    ):
        assert r.text(keep) == keep, keep
    assert (
        r.text("--password s3cret --token=abc123 --api-key XYZ789")
        == "--password <secret-1> --token=<secret-2> --api-key <secret-3>"
    )
    assert r.text("MY_SECRET=hunter22") == "MY_SECRET=<secret-4>"
    assert r.text("/home/alice/x and alice") == "/home/user-1/x and user-1"


def test_redact_table_every_string_column():
    t = pl.DataFrame(
        {
            "raw": ["from node-x:1:2 [0] NCCL INFO 10.9.8.7"],
            "host": ["node-x"],
            "peer_addr": ["10.9.8.7<5555>"],
            "path": ["node-x.rank0.log"],
            "n": [1],
        }
    )
    out = redact_table(t)
    assert out.row(0) == ("from host-1:1:2 [0] NCCL INFO ip-1", "host-1", "ip-1<5555>", "host-1.rank0.log", 1)


def test_redact_command_errors(tmp_path, monkeypatch, capsys):
    code, _, e = run(["redact", tmp_path / "nope", "-o", tmp_path / "out"], monkeypatch, capsys)
    assert code == 2 and "no such file" in " ".join(e.split())
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "rank0.log").write_text("x\n")
    code, _, e = run(["redact", tmp_path / "logs", "-o", tmp_path / "logs" / "inside"], monkeypatch, capsys)
    assert code == 2 and "must not be inside" in e, e
    assert "Traceback" not in e
