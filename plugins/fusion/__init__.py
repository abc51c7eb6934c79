"""fusion: the `analysis_models` panel answers in parallel (threads, each member through the attempt engine with its
own endpoint fallback, priced at its endpoint's list price); the analyst `model` compares the answers and returns
structured JSON (consensus, contradictions, partial coverage, unique insights, blind spots: the openrouter SDK's
FusionAnalysisResult). Two ways in:

- the model slug `gateway/fusion` (stage.fusion_stage, run by the router pre-stage plugins.routers): the final answer
  is written by the analyst as the request's own routed call (so it streams, falls back and is billed like any
  request), its instructions carrying the panel answers and the analysis. The panel's and the analysis' costs are the
  stage's `cost_usd` and their tokens its `usage` (held, charged and added to the request's usage).
- the server tool `gateway:fusion` (tool.fusion_tool_run, run by the server-tool loop): the model asks the panel a
  question; the analysis and the answers are the tool result it reads, the call an output item of its own type
  (`gateway:fusion`, with `response.fusion_call.*` stream events as it runs), its cost and tokens charged with the
  request and its figures a pipeline entry. The analyst defaults to the model that called it.

The panel may use server tools (`tools`: default web search and web fetch when a search engine is configured, `[]`
none) up to `max_tool_calls` (1-16, default 4) each: a member runs through the server-tool loop, every round and
search billed, and what its tools hand it (search results, pages) is scanned by the caller's guardrails before its
next round, as the request's own loop is (RequestContext.result_scan): a redaction is what it reads, a block fails
the whole request with the guardrail's error (a fusion answer built from the other members would hide the refusal):
no member starts another round, the analysis and the final answer never run, and what ran is charged. A member that
fails is reported (status, error) and the run goes on; when all fail, the slug's request goes to the first panel
model as a plain request would (and fails as it would), the tool's call fails. A fusion run cannot start another:
gateway/fusion is no panel or analyst model, gateway:fusion no panel tool, and gateway/fusion is not given the
gateway:fusion tool."""
