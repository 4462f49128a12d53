"""`python -m replay.view OUT`: a run's states, teacher answers and pairs as static pages in OUT/view/.

load (every run output, read in one place) → verdicts (each state decided as the run decided it) →
index (counts and the list's compact index) and pages / content (template contexts) → render (jinja2,
autoescaped) → build (one streamed pass, swapped in at the end).
"""
