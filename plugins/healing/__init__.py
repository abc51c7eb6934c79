"""The response-healing plugin (stage): a JSON answer the model broke comes back as valid JSON."""
