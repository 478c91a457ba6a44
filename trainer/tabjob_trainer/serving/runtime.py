"""The MLServer inference runtime for a finished tabjob run: ``tabjob_trainer.serving.runtime.TabjobRuntime``.

``parameters.uri`` is a run directory or an export of one (``tabjob export``); ``parameters.extra.model`` names a
leaderboard model instead of the best. The run is loaded once (``Predictor``) and each request's rows are predicted
in a worker thread, so the event loop stays free for health checks and several requests predict at once. Requests
the model cannot answer get a 400 whose message names the input (``InferenceError``), never a 500.

Responses are built as ``ResponseOutput``s directly: MLServer 1.7.1's ``PandasCodec.encode_response`` fails on
pandas 3 string columns (KeyError 'O').
"""

from __future__ import annotations

import asyncio

import pandas as pd
from mlserver import MLModel
from mlserver.errors import InferenceError
from mlserver.types import InferenceRequest, InferenceResponse, MetadataTensor, Parameters, ResponseOutput
from mlserver.utils import get_model_uri

from tabjob_trainer.errors import DataError
from tabjob_trainer.predictor import Predictor
from tabjob_trainer.serving.schema import (
    RequestError,
    Tensor,
    flat,
    frame_from_inputs,
    input_metadata,
    output_metadata,
    outputs_from_frame,
    prediction_datatype,
)

SOURCE = "request"  # how preprocessing errors name where the rows came from


def _metadata(tensors: list[Tensor]) -> list[MetadataTensor]:
    return [MetadataTensor(name=t.name, datatype=t.datatype, shape=t.shape) for t in tensors]


class TabjobRuntime(MLModel):
    """A tabjob run behind MLServer: one input per feature column in, `tabjob predict`'s columns out."""

    predictor: Predictor

    async def load(self) -> bool:
        uri = await get_model_uri(self._settings)
        extra = (self._settings.parameters.extra if self._settings.parameters else None) or {}
        try:
            self.predictor = await asyncio.to_thread(Predictor.load, uri, extra.get("model"))
        except DataError as exc:
            raise InferenceError(f"cannot load the tabjob run at {uri}: {exc}") from None
        files = self.predictor.files
        # Settings written by `tabjob export` already advertise these; hand-written ones get them here.
        if not self._settings.inputs:
            self._settings.inputs = _metadata(input_metadata(files.pre))
        if not self._settings.outputs:
            self._settings.outputs = _metadata(output_metadata(files.label, files.output_columns()))
        self._prediction = prediction_datatype(files.label)
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        tensors = [Tensor(i.name, str(i.datatype), list(i.shape), flat(i.data.root)) for i in payload.inputs]
        try:
            frame = frame_from_inputs(self.predictor.pre, tensors)
        except RequestError as exc:
            raise InferenceError(str(exc)) from None
        if len(frame) == 0:
            predicted = pd.DataFrame(columns=self.predictor.files.output_columns())  # an empty batch: no rows
        else:
            try:
                predicted = await asyncio.to_thread(self.predictor.predict_frame, frame, SOURCE)
            except DataError as exc:  # e.g. an infinite number: the preprocessing's own message names the column
                raise InferenceError(str(exc)) from None
        outputs = [
            ResponseOutput(
                name=t.name,
                datatype=t.datatype,
                shape=t.shape,
                data=t.data,
                parameters=Parameters(content_type="str") if t.datatype == "BYTES" else None,
            )
            for t in outputs_from_frame(predicted, self._prediction)
        ]
        return InferenceResponse(
            model_name=self.name,
            model_version=self.version,
            id=payload.id,
            parameters=Parameters(content_type="pd"),
            outputs=outputs,
        )
