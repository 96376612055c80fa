"""Steps several protocols share, parameterised by prompt, role and item type: writing questions with
reference answers from passages (with the filters), candidates answering them, and LLM judging with or
without the reference. Each is one `ctx.map`/`ctx.judge` call with typed results."""
