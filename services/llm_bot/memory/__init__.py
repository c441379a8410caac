"""Memory model: chat messages, the bounded window reducer and working memory."""
