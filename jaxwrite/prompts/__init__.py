"""The official judge prompts, verbatim with their sources, and the messages built from them: one home
below both `evals` (which asks the judges) and `data_pipelines` (which renders critic SFT data in the
critic's own format), so the two can never drift apart.
"""
from jaxwrite.prompts.messages import (CRITIC_SYSTEM, CRITIC_USER, LONGBENCH_WRITE_JUDGE, critic_messages,
                                       critic_verdict, longbench_write_judge_messages)
from jaxwrite.prompts.official import official_prompt, official_prompt_source, official_prompt_version

__all__ = ["CRITIC_SYSTEM", "CRITIC_USER", "LONGBENCH_WRITE_JUDGE", "critic_messages", "critic_verdict",
           "longbench_write_judge_messages", "official_prompt", "official_prompt_source", "official_prompt_version"]
