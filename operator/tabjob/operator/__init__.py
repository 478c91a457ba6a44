"""The operator: pure builders (spec + plan -> child objects), pure status (observed children -> status) and a
thin kopf layer (handlers.py) that observes, creates what is missing and patches status when it changed."""
