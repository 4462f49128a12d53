"""Stage 3 of a run, ask: the teachers' proposals at every selected state.

Owns: the pool a run asks (`pool`: keys checked, built on its cache, unreachable endpoints stopped),
one state's answers (`answers.ask_state`: every eligible teacher, or cheapest first with --early-stop),
`--trace-parallel`'s waves (`waves`), `--batch` (`batches`), the dry run's cost model (`estimate`) and
the event loop's health (`looplag`).
Must not: decide a consensus or write a pair (that is `replay/decide/`); make a call but through
`teachers/` (litellm, one retry policy, the cache, the cost cap).
Start at `answers.ask_state`.
"""
