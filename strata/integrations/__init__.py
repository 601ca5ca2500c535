"""Strata in agent frameworks, each an optional extra (``pip install 'strata-memory[langgraph]'``).

- ``strata.integrations.langgraph``: ``StrataStore``, LangGraph's ``BaseStore`` on Strata.
- ``strata.integrations.langchain``: Strata's memory tools as LangChain tools.

Neither module is imported here, so ``import strata`` never needs the frameworks.
"""
