"""Redaction of hostile input (issue 16): 30+ kinds of secrets in realistic positions, none survives any
output, pseudonyms are stable across files, and the redacted copy is diagnosed with the same ranks.

The corpus is two real fixtures (gloo-01, public-02) with the lines below seeded into a rank's stderr, the
launcher output and a SLURM-style file; each kind lists the strings that must not appear anywhere after
redaction (file names included).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from correlator.diagnose import diagnose
from correlator.ingest import ingest
from correlator.redact import Redactor, redact_dir
from tests.conftest import run_cli

CASES = Path(__file__).resolve().parent.parent / "fixtures" / "cases"

#: kind -> (line as a tool or a shell prints it, strings that must not survive)
KINDS: dict[str, tuple[str, list[str]]] = {
    "nccl_host_prefix": ("trn-node-12:4242:4300 [0] NCCL INFO Init COMPLETE", ["trn-node-12"]),
    "nccl_init_host": (
        (
            "trn-node-12:4242:4300 [0] NCCL INFO ncclCommInitRank comm 0x55d0c3a4e2b0 rank 0 nranks 4 "
            "cudaDev 0 busId 1000 commId 0x1 - Init COMPLETE"
        ),
        ["trn-node-12"],
    ),
    "fqdn": ("connecting to gpu17.cluster.acme-corp.com:29500", ["gpu17", "acme-corp"]),
    "ipv4": ("Bootstrap : Using eth0:10.44.3.21<0>", ["10.44.3.21"]),
    "ipv6_full": (
        "peer 2001:0db8:85a3:0000:0000:8a2e:0370:7334 closed",
        ["2001:0db8:85a3:0000:0000:8a2e:0370:7334", "2001:db8:85a3::8a2e:370:7334"],
    ),
    "ipv6_compressed": ("listening on [2001:db8:4::17]:29400", ["2001:db8:4::17"]),
    "ipv6_link_local": (
        "NET/Socket : Using [0]eth0:fe80::a00:27ff:fe4e:66a1%eth0<0>",
        ["fe80::a00:27ff:fe4e:66a1"],
    ),
    "mac": ("link/ether 0c:42:a1:b4:c5:d6 brd ff:ff:ff:ff:ff:ff", ["0c:42:a1:b4:c5:d6"]),
    "ib_guid": (
        "Port GUID: 0x0c42a10300b4c5d6 Node GUID 0x0c42a10300b4c5d7",
        ["0c42a10300b4c5d6", "0c42a10300b4c5d7"],
    ),
    "home": ('  File "/home/quentin/proj/train.py", line 7, in main', ["quentin"]),
    "users_mac": ("cache /Users/rosalind/Library/Caches", ["rosalind"]),
    "lustre": ("saving to /lustre/fsw/home/sebastian/ckpt/step100.pt", ["sebastian"]),
    "prompt": ("[thaddeus@gpu-login01 ~]$ sbatch train.sbatch", ["thaddeus", "gpu-login01"]),
    "prompt_colon": ("ursula@login-node-3:~/runs$ tail -f rank0.log", ["ursula", "login-node-3"]),
    "slurm_user": ("SLURM_JOB_USER=valentina SLURM_JOB_ID=812345", ["valentina"]),
    "slurm_nodelist": ("SLURM_JOB_NODELIST=dgx-h100-[017-018,020]", ["dgx-h100"]),
    "slurm_node_expanded": ("srun: error: dgx-h100-018: task 3: Exited with exit code 1", ["dgx-h100"]),
    "rdzv_endpoint": (
        "torchrun --nnodes=2 --rdzv_endpoint=rdzv-host-9:29400 --rdzv_backend=c10d train.py",
        ["rdzv-host-9"],
    ),
    "master_addr": ("MASTER_ADDR=master-node-4 MASTER_PORT=29500", ["master-node-4"]),
    "email": ("job owner: wilhelmina.oakes@acme-corp.com", ["wilhelmina.oakes"]),
    "aws_key": ("AWS_ACCESS_KEY_ID=AKIAZQ4EXAMPLE7XK2PB", ["AKIAZQ4EXAMPLE7XK2PB"]),
    "aws_secret": (
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY",
        ["wJalrXUtnFEMI/K7MDENG"],
    ),
    "github": (
        "git clone https://ghp_R2d2C3p0Bb8Ll4Kk6Jj0Hh2Gg4Ff6Ee8Zz1Yy@github.com/acme/x",
        ["ghp_R2d2C3p0Bb8"],
    ),
    "huggingface": (
        "HF_TOKEN=hf_Qw8vZx2LmN4pR6tY0uI3oP5aS7dF9gH1jL huggingface-cli login",
        ["hf_Qw8vZx2LmN4"],
    ),
    "openai": ("OpenAI key sk-proj-Ab3De5Gh7Jk9Mn1Pq3St5Vw7Yz9Bc1Ef3Gh5Jk7Mn9Pq", ["sk-proj-Ab3De5Gh7"]),
    "wandb": ("wandb login 3f9a1c7e5b2d4f6a8c0e1b3d5f7a9c2e4b6d8f02", ["3f9a1c7e5b2d4f6a8c0e"]),
    "google": ("GOOGLE_API=AIzaSyD3x4mPl3K3yF0rT3st1ngPurp0s3sXyZw", ["AIzaSyD3x4mPl3K3y"]),
    "jwt": (
        "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ0cmFpbmVyIn0.c2lnbmF0dXJlLWhlcmUtMTIz",
        ["eyJzdWIiOiJ0cmFpbmVyIn0"],
    ),
    "bearer": (
        'curl -H "Authorization: Bearer tkn9f8e7d6c5b4a3f2e1d0c" https://api.acme-corp.com/v1',
        ["tkn9f8e7d6c5b4a3f2e1d0c"],
    ),
    "url_password": (
        "pip install --index-url https://deploy:Hunt3rTw0pass@pypi.acme-corp.com/simple x",
        ["Hunt3rTw0pass"],
    ),
    "password_arg": (
        "python train.py --db-password 'c0rrect horse' --password=Tr0ub4dor3x",
        ["c0rrect horse", "Tr0ub4dor3x"],
    ),
    "s3": ("loading s3://acme-ml-private-ckpts/run7/step9.pt", ["acme-ml-private-ckpts"]),
    "gcs": ("gsutil cp gs://acme-secret-data/shards/0001.tar .", ["acme-secret-data"]),
    "azure_sas": (
        "https://acmestore.blob.core.windows.net/c/x.bin?sv=2021-08-06&se=2026-01-01&sig=abCD12efGH34%2Bij56KL%3D",
        ["abCD12efGH34", "acmestore"],
    ),
    "slack_webhook": (
        "notify https://hooks.slack.com/services/T0ABCDE12/B0FGHIJ34/xYzAbCdEfGhIjKlMnOpQrStU",
        ["T0ABCDE12", "xYzAbCdEfGhIjKlMnOpQrStU"],
    ),
    "k8s_pod": (
        "pod/llm-train-7d9c8b7f6-x2k4q restarted; POD_NAME=llm-train-worker-3",
        ["llm-train-7d9c8b7f6-x2k4q", "llm-train-worker-3"],
    ),
    "ssh_key_head": ("-----BEGIN OPENSSH PRIVATE KEY-----", []),
    "ssh_key_body": (
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
        ["b3BlbnNzaC1rZXktdjEAAAAABG5vbmU"],
    ),
    "ssh_key_tail": ("-----END OPENSSH PRIVATE KEY-----", []),
    "env_secret": ("export MY_SERVICE_TOKEN=st-8812-velvet-otter-9", ["st-8812-velvet-otter-9"]),
}
NEEDLES = sorted({n for _, ns in KINDS.values() for n in ns})
SEED = "\n".join(line for line, _ in KINDS.values()) + "\n"


def leaks(text: str) -> list[str]:
    low = text.lower()
    return [n for n in NEEDLES if n.lower() in low]


def verdict(root: Path) -> tuple[list[int], list[int], str]:
    j = diagnose(ingest(root).table).to_json()
    return j["initiating_ranks"], j["collateral_ranks"], j["failure_kind"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile-redact") / "logs"
    shutil.copytree(next(CASES.glob("gloo-01-*")) / "logs", root / "gloo")
    shutil.copytree(next(CASES.glob("public-02-*")) / "logs", root / "multinode")
    stderr0 = next(root.glob("gloo/torchrun_logs/*/attempt_0/0/stderr.log"))
    stderr0.write_text(SEED + stderr0.read_text())
    launcher = root / "gloo" / "launcher.log"
    launcher.write_text(launcher.read_text() + SEED)
    (root / "slurm-812345.out").write_text(SEED)
    # a torchrun run folder named after a host, and a file named after one
    d = root / "dgx-h100-018_4711_x" / "attempt_0" / "0"
    d.mkdir(parents=True)
    (d / "stdout.log").write_text("[rank0]: hello from dgx-h100-018\n")
    return root


def test_at_least_30_kinds_really_seeded(corpus):
    assert len([k for k, (_, ns) in KINDS.items() if ns]) >= 30
    text = "\n".join(p.read_text(errors="replace") for p in corpus.rglob("*") if p.is_file())
    missing = [k for k, (_, ns) in KINDS.items() if ns and not any(n.lower() in text.lower() for n in ns)]
    assert not missing, missing


def copy_leaks(
    src: Path,
    out: Path,
    find: Callable[[str], list[str]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[dict[str, list[str]], str]:
    """``rankscope redact src -o out`` (must exit 0): what ``find`` finds in each file name (``name …``)
    and file of the copy, and what the command printed."""
    code, o, e = run_cli(["redact", src, "-o", out], monkeypatch, capsys)
    assert code == 0, e
    found = {}
    for p in out.rglob("*"):
        rel = p.relative_to(out).as_posix()
        if find(rel):
            found[f"name {rel}"] = find(rel)
        if p.is_file():
            bad = find(p.read_text(errors="replace"))
            if bad:
                found[rel] = bad
    return found, o + e


def test_no_kind_leaks_from_the_redacted_copy(corpus, tmp_path, monkeypatch, capsys):
    out = tmp_path / "copy"
    found, printed = copy_leaks(corpus, out, leaks, monkeypatch, capsys)
    assert not leaks(printed), leaks(printed)
    by_kind = {k for k, (_, ns) in KINDS.items() if any(n in v for v in found.values() for n in ns)}
    assert not found, (by_kind, found)
    # the key block survives as its BEGIN/END lines around a pseudonym
    txt = (out / "slurm-812345.out").read_text()
    assert "-----BEGIN OPENSSH PRIVATE KEY-----\n<secret-" in txt


def redacted_outputs(
    root: Path,
    commands: list[list[object]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> dict[str, str]:
    """What each command prints (stdout and stderr, each must exit 0), and under ``parquet`` every string
    of ``rankscope timeline root --redact``'s parquet table."""
    outputs = {}
    for args in commands:
        code, o, e = run_cli(args, monkeypatch, capsys)
        assert code == 0, e
        outputs[" ".join(map(str, args[:1] + args[2:4]))] = o + e
    pq = tmp_path / "t.parquet"
    code, _, e = run_cli(["timeline", root, "-o", pq, "--redact"], monkeypatch, capsys)
    assert code == 0, e
    t = pl.read_parquet(pq)
    outputs["parquet"] = "\n".join(
        "\n".join(t[c].drop_nulls().to_list()) for c, d in t.schema.items() if d == pl.String
    )
    return outputs


def test_no_kind_leaks_through_redact_flag(corpus, tmp_path, monkeypatch, capsys):
    outputs = redacted_outputs(
        corpus,
        [
            ["diagnose", corpus, "-f", "json", "--redact"],
            ["events", corpus, "-f", "json", "-n", "0", "--redact"],
        ],
        tmp_path,
        monkeypatch,
        capsys,
    )
    bad = {k: leaks(v) for k, v in outputs.items() if leaks(v)}
    assert not bad, bad


def test_redacted_copy_names_the_same_ranks(corpus, tmp_path):
    out = tmp_path / "copy"
    stats = redact_dir(corpus, out)
    assert verdict(out / "gloo") == verdict(corpus / "gloo")
    assert verdict(out / "multinode") == verdict(corpus / "multinode")
    assert ingest(out).lines_read == ingest(corpus).lines_read
    assert stats.distinct["host"] >= 8 and stats.distinct["secret"] >= 15


def test_pseudonyms_stable_across_files(corpus, tmp_path):
    out = tmp_path / "copy"
    redact_dir(corpus, out)
    a = (out / "slurm-812345.out").read_text().splitlines()
    b = (out / "gloo" / "launcher.log").read_text().splitlines()[-len(a) :]
    assert a == b  # the same seeded lines became the same pseudonyms in both files


def test_redactor_is_linear_on_long_lines():
    """Hostile 200 KB lines that made Python's backtracking quadratic; the guard is generous (a hang
    guard, not a speed test): each shape doubled must not cost more than ~3x."""
    shapes = ["ab." * 20000, "TOKEN" * 12000, "a-" * 30000, "x@" * 30000, "--token=" * 8000, "a://" * 15000]
    for s in shapes:
        cost = []
        for k in (1, 4):
            r = Redactor()
            r.learn_host("node-a")
            t0 = time.process_time()
            r.learn_text(s * k)
            r.text(s * k)
            cost.append(time.process_time() - t0)
        assert cost[1] < 12 * max(cost[0], 0.05), (s[:10], cost)  # quadratic would be 16x


def test_redact_output_refusals(tmp_path, monkeypatch, capsys):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "rank0.log").write_text("[rank0]: hello\n")
    orig = (logs / "rank0.log").read_bytes()
    for dst, why in (
        (logs, "must not be the input"),
        (logs / "in", "must not be inside"),
        (tmp_path, "must not hold the input"),
    ):
        code, _, e = run_cli(["redact", logs, "-o", dst], monkeypatch, capsys)
        assert code == 2 and why in " ".join(e.split()), e
    # FILE -o ITS_DIR: must not overwrite the original
    code, _, e = run_cli(["redact", logs / "rank0.log", "-o", logs], monkeypatch, capsys)
    assert code == 2 and (logs / "rank0.log").read_bytes() == orig, e
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("x")
    code, _, e = run_cli(["redact", logs, "-o", full], monkeypatch, capsys)
    assert code == 2 and "not empty" in e
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def test_two_names_one_pseudonym_keep_both_files(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "NODE-A.rank0.log").write_text("[rank0]: upper\n")
    (logs / "node-a.rank0.log").write_text("[rank0]: lower\n")
    stats = redact_dir(logs, tmp_path / "out")
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert stats.files == 2 and len(files) == 2, files
    assert not any("node-a" in f.lower() for f in files)


def test_token_pattern_keeps_path_separators(tmp_path):
    logs = tmp_path / "logs"
    (logs / "API_TOKEN=abc12345").mkdir(parents=True)
    (logs / "API_TOKEN=abc12345" / "rank0.log").write_text("[rank0]: x\n")
    redact_dir(logs, tmp_path / "out")
    got = [p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*.log")]
    assert got == ["API_TOKEN=<secret-1>/rank0.log"], got


def test_redact_skips_fifo_and_links_out(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "rank0.log").write_text("[rank0]: x\n")
    os.mkfifo(logs / "pipe.log")
    (tmp_path / "outside.log").write_text("[rank0]: outside secret\n")
    os.symlink(tmp_path / "outside.log", logs / "link.log")
    stats = redact_dir(logs, tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["rank0.log"]
    assert any("pipe.log" in s for s in stats.skipped) and any("link.log" in s for s in stats.skipped), (
        stats.skipped
    )
    json.dumps(stats.skipped)


# ------------------------------------------- issue 35: hosts glued into folder names, W&B keys in any quoting

_WANDB = "5e2b8c1d4f7a9e3b6c0d2f4a8e1b3c5d7f9a0e2b"
_FOLDER_HOSTS = ("gpunode17", "trn-node-42", "dgxa100x9")
#: W&B keys as programs print them: only the first shape was redacted before (issue 35 item 5).
_WANDB_LINES = (
    f"WANDB_API_KEY={_WANDB}",
    f'os.environ["WANDB_API_KEY"] = "{_WANDB}"',
    f"os.environ['WANDB_API_KEY']='{_WANDB.upper()}'",
    f'wandb.login(key="{_WANDB}")',
    f"wandb: env WANDB_API_KEY=`{_WANDB}`",
    f"machine api.wandb.ai login user password {_WANDB}",
)


def _glued_tree(root: Path) -> Path:
    """torchrun folders named after their host (the host named nowhere else) and W&B keys in stderr, in
    the error.json (as JSON text: escaped quotes) and in a file name."""
    runs = [
        root / f"torchrun_logs-{_FOLDER_HOSTS[0]}" / "none_k2j3h4g5" / "attempt_0" / "0",
        root / f"myrun-{_FOLDER_HOSTS[1]}" / "attempt_0" / "1",
        root / f"exp7-{_FOLDER_HOSTS[2]}_x7k2q9ab" / "attempt_0" / "2",
    ]
    body = "".join(f"[rank{{r}}]: {line}\n" for line in _WANDB_LINES)
    for r, d in enumerate(runs):
        d.mkdir(parents=True)
        (d / "stderr.log").write_text(body.format(r=r) + f"[rank{r}]: RuntimeError: boom {r}\n")
    doc = {"message": {"message": f'RuntimeError: env {{"WANDB_API_KEY": "{_WANDB}"}}', "extraInfo": {}}}
    (runs[0] / "error.json").write_text(json.dumps(doc))
    (root / f"wandb-WANDB_API_KEY={_WANDB}.log").write_text("[rank0]: hello\n")
    return root


def _glued_leaks(text: str) -> list[str]:
    low = text.lower()
    return [n for n in (*_FOLDER_HOSTS, _WANDB, _WANDB[:12]) if n.lower() in low]


def test_glued_folder_hosts_and_wandb_keys_leave_no_trace(tmp_path, monkeypatch, capsys):
    logs = _glued_tree(tmp_path / "logs")
    out = tmp_path / "copy"
    found, printed = copy_leaks(logs, out, _glued_leaks, monkeypatch, capsys)
    assert not found, found
    assert not _glued_leaks(printed)
    assert len(list(out.rglob("stderr.log"))) == 3 and len(list(out.rglob("error.json"))) == 1
    outputs = redacted_outputs(
        logs,
        [
            ["diagnose", logs, "-f", "json", "--redact"],
            ["diagnose", logs, "--redact"],
            ["events", logs, "-n", "0", "--redact"],
            ["events", logs, "-f", "json", "-n", "0", "--redact"],
            ["diagnose", out, "-f", "json"],
        ],
        tmp_path,
        monkeypatch,
        capsys,
    )
    bad = {k: _glued_leaks(v) for k, v in outputs.items() if _glued_leaks(v)}
    assert not bad, bad
    # the folder hosts became pseudonyms, and the copy is read as the same three ranks
    assert {p.relative_to(out).parts[0].split("-", 1)[0] for p in out.rglob("stderr.log")} == {
        "torchrun_logs",
        "myrun",
        "exp7",
    }
    assert sorted(ingest(out).table["rank"].drop_nulls().unique().to_list()) == [0, 1, 2]


def test_a_40_hex_commit_id_is_kept_when_no_wandb_is_named():
    r = Redactor()
    line = "git commit 5e2b8c1d4f7a9e3b6c0d2f4a8e1b3c5d7f9a0e2b (HEAD -> main)"
    assert r.text(line) == line
