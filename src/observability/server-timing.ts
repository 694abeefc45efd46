import { stepChannel, type StepMessage } from '../pipeline/tracing.js';

/**
 * The `Server-Timing` header's upstream share (issue 3), as a subscriber of the pipeline's `upstream` step
 * (issue 24 §3): the time each request spends in that step (bulkhead queue, opening the upstream session, the
 * exchange, a retry) is added to its stream, which splits the POST's total into `gateway` and `upstream`.
 * The channel is the process's: gateways in one process share one subscription, counted, so no request's time
 * is added twice. Returns the unsubscriber.
 */
export function subscribeServerTiming(): () => void {
  users += 1;
  if (users === 1) stepChannel('upstream').subscribe(handlers);
  let subscribed = true;
  return () => {
    if (!subscribed) return;
    subscribed = false;
    users -= 1;
    if (users === 0) stepChannel('upstream').unsubscribe(handlers);
  };
}

let users = 0;


function stop(message: StepMessage): void {
  message.context.stream?.recordUpstreamTime?.(performance.now() - message.startedAt);
}

const handlers = {
  start: (): void => undefined,
  // A step that threw before it returned a promise ends here; one that returned a promise at asyncEnd.
  end: (message: StepMessage): void => {
    if (message.error !== undefined) stop(message);
  },
  asyncStart: (): void => undefined,
  asyncEnd: stop,
  error: (): void => undefined,
};
