# The toolgate image used by docker-compose.yml: every worker, the CLI and the demo provider.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY toolgate toolgate
COPY cli cli
COPY client client
COPY contracts contracts
COPY schemas schemas
COPY store store
COPY topics topics
COPY workers workers
COPY ops ops
COPY door door
COPY console console
RUN pip install --no-cache-dir '.[otlp]' && useradd --create-home toolgate \
    && mkdir -p /secrets /home/toolgate/.toolgate && chown toolgate /secrets /home/toolgate/.toolgate
USER toolgate
ENV TOOLGATE_HOME=/home/toolgate/.toolgate
ENTRYPOINT ["toolgate"]
