import type { ListTasksRequest, ListTasksResponse, Task } from '@a2a-js/sdk';
import type { ServerCallContext, TaskStore } from '@a2a-js/sdk/server';
import { DatabaseTaskStore } from '@a2a-js/sdk/server/database';
import type { Store } from '../../store/index.js';
import type { ChatExecutor } from './executor.js';

/**
 * A2A tasks, kept in the database by the SDK's own task store (table `a2a_tasks`; the agent's
 * address is the tenant, the caller the owner), so that any process answers for any task. A
 * task read while still open is first brought up to date from its chat session: a reply that
 * came after the call stopped waiting completes it.
 */
export class A2aTaskStore implements TaskStore {
  private readonly tasks: DatabaseTaskStore;

  constructor(
    store: Store,
    private readonly executor: ChatExecutor,
  ) {
    this.tasks = new DatabaseTaskStore(store.db, { tableName: 'a2a_tasks' });
  }

  save(task: Task, context: ServerCallContext): Promise<void> {
    return this.tasks.save(task, context);
  }

  async load(taskId: string, context: ServerCallContext): Promise<Task | undefined> {
    const task = await this.tasks.load(taskId, context);
    if (!task) return undefined;
    const current = await this.executor.reconcile(task, context);
    if (!current) return task;
    await this.tasks.save(current, context);
    return current;
  }

  list(params: ListTasksRequest, context: ServerCallContext): Promise<ListTasksResponse> {
    return this.tasks.list(params, context);
  }
}
