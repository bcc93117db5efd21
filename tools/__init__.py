"""Repository maintenance: notebooks kept in step with the book configuration."""
