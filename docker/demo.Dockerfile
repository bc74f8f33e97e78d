# The image docker-compose.yml runs the demo's worker, beat and producer in.
FROM python:3.12-slim
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY celery_singleton_lock ./celery_singleton_lock
RUN pip install --no-cache-dir -e '.[demo]'
