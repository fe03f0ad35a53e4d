"""``eval``: score search on a benchmark or on a git repository's own history, or compare two saved runs."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import UsageError
from ..service import MAX_LIMIT, MODES
from .output import emit, json_option


@click.command(name="eval")
@click.argument("dataset", required=False)
@click.argument("path", required=False, type=click.Path(file_okay=False))
@click.option("--mode", "modes", type=click.Choice(MODES), multiple=True,
              help="Search mode; repeatable for git [default: hybrid; git: hybrid, bm25 and vector].")
@click.option("--commits", type=click.IntRange(1), default=200, show_default=True,
              help="git: use up to N recent usable commits as queries.")
@click.option("--rerank", is_flag=True, help="Re-score the top chunks with the cross-encoder, as search --rerank.")
@click.option("--rerank-model", default=None,
              help="Cross-encoder for --rerank (implies it) [default: $CODII_SQL_RERANK_MODEL].")
@click.option("--embedder", default=None,
              help="Index the corpora with this embedder (local, local:fast, ...); each gets an index of its own.")
@click.option("--no-prior", is_flag=True, help="Turn off the soft source-over-tests/docs ranking prior.")
@click.option("--repos", default=None, help="SWE-bench: only these repositories, e.g. requests,flask.")
@click.option("--limit", type=click.IntRange(1), default=None, help="Only the first N queries.")
@click.option("--top", type=click.IntRange(1, MAX_LIMIT), default=None,
              help="Results per query [default: 100 for CoSQA, 10 files for SWE-bench].")
@click.option("--bench-dir", envvar="CODII_SQL_BENCH", type=click.Path(file_okay=False), default=None,
              help="Folder with cosqa/ and swebench/ [env CODII_SQL_BENCH]; needed for the named datasets.")
@click.option("--work-dir", envvar="CODII_SQL_BENCH_WORK", type=click.Path(file_okay=False),
              default="~/.cache/codii-bench", show_default=True,
              help="Snippets, source trees and saved runs [env CODII_SQL_BENCH_WORK].")
@click.option("--compare", nargs=2, type=click.Path(exists=True, dir_okay=False), default=None,
              help="Print the metric deltas between two saved runs A B (B - A) instead of running.")
@click.option("--budgets", default="2000,5000,10000,20000", show_default=True,
              help="tokens: count a success within each of these token budgets (the largest stops each agent).")
@click.option("--search-tokens", type=click.IntRange(100), default=2000, show_default=True,
              help="tokens: the max_tokens the codii-sql agent passes search_code.")
@json_option
def eval_(dataset, path, modes, commits, rerank, rerank_model, embedder, no_prior, repos, limit, top, bench_dir, work_dir, compare,
          budgets, search_tokens, as_json):
    """Score search on a benchmark: DATASET is cosqa, swebench or a dataset folder, or `git [PATH]`:
    find the files of a repository's recent commits from their subjects, or `tokens [PATH|swebench]`:
    the tokens a grep agent and a codii-sql agent read before the changed lines (see docs/eval.md)."""
    from .. import eval as evaluate

    if compare:
        cmp = evaluate.compare_runs(evaluate.load_run(compare[0]), evaluate.load_run(compare[1]))
        return emit(cmp) if as_json else click.echo(evaluate.format_comparison(cmp))
    if dataset is None:
        raise UsageError("missing DATASET: codii-sql eval cosqa|swebench|DIR|git [PATH] (or --compare A.json B.json)")
    if dataset == "tokens":
        if rerank or rerank_model or embedder or no_prior or top or modes:
            raise UsageError("eval tokens takes --commits, --repos, --limit, --budgets and --search-tokens: its "
                             "codii-sql agent searches as an agent does (hybrid, the default embedder)")
        return _tokens(evaluate, path, commits, repos, limit, bench_dir, work_dir, budgets, search_tokens, as_json)
    if dataset == "git":
        if rerank or rerank_model or repos or limit or top:
            raise UsageError("--rerank, --repos, --limit and --top are for the benchmarks: eval git takes --commits "
                             "N and searches 10 files per query")
        cfg = evaluate.GitEvalConfig(Path(path or "."), commits=commits, modes=tuple(dict.fromkeys(modes)) or
                                     evaluate.git.DEFAULT_MODES, embedder=embedder, role_prior=not no_prior,
                                     work_dir=Path(work_dir))
        return _git(evaluate, cfg, as_json)
    if path is not None or len(modes) > 1:
        raise UsageError("a second PATH and several --mode values are for `eval git` only: one --mode per run")
    cfg = evaluate.EvalConfig(dataset, mode=modes[0] if modes else "hybrid", rerank=rerank or rerank_model is not None,
                              rerank_model=rerank_model, embedder=embedder, role_prior=not no_prior,
                              repos=repos.split(",") if repos else [], limit=limit, top=top,
                              bench_dir=Path(bench_dir) if bench_dir else None, work_dir=Path(work_dir))
    _saved(evaluate, evaluate.evaluate(cfg, log=lambda msg: click.echo(msg, err=True)), cfg.work_dir,
           evaluate.format_run, as_json)


def _saved(evaluate, run: dict, work_dir: Path, text, as_json: bool) -> None:
    """Save one run record under ``work_dir``, print it (``text(run)``, or its summary as JSON) and where it went."""
    saved = evaluate.save_run(run, work_dir)
    if as_json:
        return emit({**evaluate.summary(run), "saved": str(saved)})
    click.echo(text(run))
    click.echo(f"saved: {saved}", err=True)


def _git(evaluate, cfg, as_json: bool) -> None:
    """Run ``eval git``, save one run record per mode, print the table (or one JSON object)."""
    result = evaluate.evaluate_git(cfg, log=lambda msg: click.echo(msg, err=True))
    saved = [str(evaluate.save_run(run, cfg.work_dir)) for run in result["runs"].values()]
    if as_json:
        return emit({**evaluate.git_summary(result), "saved": saved})
    click.echo(evaluate.format_git(result))
    click.echo("saved: " + ", ".join(saved), err=True)


def _tokens(evaluate, path, commits, repos, limit, bench_dir, work_dir, budgets, search_tokens, as_json) -> None:
    """Run ``eval tokens`` on a git repository (PATH, default ".") or on SWE-bench (PATH ``swebench``)."""
    try:
        steps = tuple(int(b) for b in budgets.split(",") if b.strip())
    except ValueError:
        raise UsageError(f"--budgets {budgets!r}: give token counts separated by commas, e.g. 2000,5000,10000") from None
    swe = path == "swebench" and not Path(path).is_dir()
    if not swe and (repos or limit):
        raise UsageError("--repos and --limit are for `eval tokens swebench`: a git repository takes --commits N")
    cfg = evaluate.TokensConfig("swebench" if swe else "git", path=Path(path or "."), commits=commits, budgets=steps,
                                search_tokens=search_tokens, repos=tuple(repos.split(",")) if repos else (),
                                limit=limit, bench_dir=Path(bench_dir) if bench_dir else None, work_dir=Path(work_dir))
    _saved(evaluate, evaluate.evaluate_tokens(cfg, log=lambda msg: click.echo(msg, err=True)), cfg.work_dir,
           evaluate.format_tokens, as_json)
