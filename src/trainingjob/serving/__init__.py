"""LLMModel (ai.example.com/v1): the serving resource, planned and built purely like TrainingJob but on its own.

types.py reads a model, builders.py makes its Deployment, Service and HorizontalPodAutoscaler, observed.py trims what
the caches hold, conditions.py derives Available/Progressing/Degraded, planner.py compares desired with observed.
The operator's LLMModel controller (operator/llmmodel/) feeds them from its indexes and applies the plan.
"""
