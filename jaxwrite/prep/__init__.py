"""Model-labelled data preparation: query-specific criteria (WritingBench schema), teacher responses
scored by the WritingBench critic and filtered to the top fraction per subdomain (writer SFT data), and
long-form prompt filtering with target word ranges (the GRPO prompt file).

Every step reads and writes jsonl, resumes by id, counts each reject and failure by reason, and talks
to models through `jaxwrite.chat` (an HTTP endpoint or a local model), sampling with the engine's
`SamplingParams`. A labelling step's settings are one `Labelling`; critic scores come from WritingBench's
own scorer (`jaxwrite.evals.score_with_critic`).
Pipeline: generate_criteria -> generate_responses -> score_responses -> build_filtered_sft;
label_long_form on its own.
"""
from jaxwrite.prep.criteria import (CRITERIA_SCHEMA, PROMPT_ID as CRITERIA_PROMPT_ID, criteria_messages,
                                    generate_criteria, parse_criteria_output, read_criteria, validate_checklist)
from jaxwrite.prep.critic_filter import build_filtered_sft, read_scores
from jaxwrite.prep.critic_scores import read_responses, score_responses
from jaxwrite.prep.inputs import LoadedQueries, QueryRecord, load_queries
from jaxwrite.prep.labelling import LABELLING_SAMPLING, LabelAsk, LabelCounts, Labelling, label_records
from jaxwrite.prep.length_labels import (LONG_FORM_LABELLING, LengthBounds, PROMPT_ID as LONG_FORM_PROMPT_ID,
                                         explicit_range, label_long_form, length_label_messages, resolve_range,
                                         validate_length_label, write_rl_prompts)
from jaxwrite.prep.model_json import extract_json
from jaxwrite.prep.teacher import WRITINGBENCH_GENERATION, generate_responses, response_id
from jaxwrite.prep.top_fraction import GroupResult, Scored, keep_count, top_fraction_per_group

__all__ = [
    "CRITERIA_SCHEMA", "CRITERIA_PROMPT_ID", "criteria_messages", "generate_criteria", "parse_criteria_output",
    "read_criteria", "validate_checklist",
    "build_filtered_sft", "read_scores", "read_responses", "score_responses",
    "LoadedQueries", "QueryRecord", "load_queries",
    "LABELLING_SAMPLING", "LabelAsk", "LabelCounts", "Labelling", "label_records",
    "LONG_FORM_LABELLING", "LengthBounds", "LONG_FORM_PROMPT_ID", "explicit_range", "label_long_form",
    "length_label_messages", "resolve_range", "validate_length_label", "write_rl_prompts",
    "extract_json", "WRITINGBENCH_GENERATION", "generate_responses", "response_id",
    "GroupResult", "Scored", "keep_count", "top_fraction_per_group",
]
