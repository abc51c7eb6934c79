"""The context-compression plugin (stage): the middle-out transform that fits the input to the endpoints' context."""
