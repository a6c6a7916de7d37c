import { create, createRegistry, type DescMessage, type MessageInitShape } from '@bufbuild/protobuf';
import { type Any, anyPack } from '@bufbuild/protobuf/wkt';
import { BindTenantSchema, TenantLogicSchema, file_lakehouse_jobs_plugins } from '../proto/gen/lakehouse/jobs/plugins_pb.js';
import { type Plan, PlanSchema } from '../proto/gen/spark/connect/base_pb.js';
import { type Command, CommandSchema, WriteOperation_SaveMode, WriteOperationV2_Mode } from '../proto/gen/spark/connect/commands_pb.js';
import {
  type Expression,
  type Expression_Literal,
  type Expression_SortOrder,
  Expression_LiteralSchema,
  Expression_SortOrder_NullOrdering,
  Expression_SortOrder_SortDirection,
  ExpressionSchema,
  Expression_Cast_EvalMode,
  MergeAction_ActionType,
} from '../proto/gen/spark/connect/expressions_pb.js';
import { Join_JoinType, type Relation, RelationSchema, Aggregate_GroupType, SetOperation_SetOpType } from '../proto/gen/spark/connect/relations_pb.js';
import { InternalError } from '../../core/errors.js';
import { quoteIdentifier, quoteName } from '../../core/naming.js';
import { redacted } from '../../core/secrets.js';
import type { Cmd, MergeAction } from './commands.js';
import type { Expr, LiteralValue, SortOrder } from './expressions.js';
import type { Extension, OptionValue, Rel } from './relations.js';
import type { TenantBinding } from '../policy/binding.js';
import { jdbcSources } from '../policy/tenant-logic.js';

/**
 * The one place where plan nodes become Spark Connect protobuf. `reveal: false` (for `plan` output
 * and logs) puts `[redacted]` where a secret would go; only the executor compiles with secrets.
 */
/** A plan ready to send, opaque to the code that sends it (the runner never builds protobuf itself). */
export type CompiledPlan = Plan;

export interface CompileOptions {
  reveal: boolean;
  /**
   * The server's ids of the rows this run's `materialize` steps kept, by name. A plan compiled
   * without one (`plan` output) names the materialized rows by their name instead.
   */
  materialized?: ReadonlyMap<string, string>;
  /**
   * The run's values of `bound` options, by name (absent from the map: the option is left out). A
   * plan compiled without the map (`plan` output) shows each as `<name>`.
   */
  bound?: ReadonlyMap<string, string>;
}

const DAY_MS = 86_400_000;

export function compileRelationPlan(rel: Rel, opts: CompileOptions): Plan {
  return create(PlanSchema, { opType: { case: 'root', value: relation(rel, opts) } });
}

export function compileCommandPlan(cmd: Cmd, opts: CompileOptions): Plan {
  return create(PlanSchema, { opType: { case: 'command', value: command(cmd, opts) } });
}

/** What the runner asks of a running streaming query (by its id) of this session. */
export type StreamingQueryAction = { await: { timeoutMs: number } } | 'recentProgress' | 'stop';

/**
 * Compute a relation now and keep its rows on the server for this session (a local checkpoint: in
 * the executors' block managers, no checkpoint directory); the answer names them.
 */
export function compileCheckpointCommand(rel: Rel, opts: CompileOptions): Plan {
  return create(PlanSchema, {
    opType: {
      case: 'command',
      value: create(CommandSchema, { commandType: { case: 'checkpointCommand', value: { relation: relation(rel, opts), local: true, eager: true } } }),
    },
  });
}

/** Forget the rows a checkpoint kept (by the id its answer named). */
export function compileRemoveCachedRelation(relationId: string): Plan {
  return create(PlanSchema, {
    opType: {
      case: 'command',
      value: create(CommandSchema, { commandType: { case: 'removeCachedRemoteRelationCommand', value: { relation: { relationId } } } }),
    },
  });
}

export function compileStreamingQueryCommand(query: { id: string; runId: string }, action: StreamingQueryAction): Plan {
  const commandCase =
    action === 'recentProgress'
      ? ({ case: 'recentProgress', value: true } as const)
      : action === 'stop'
        ? ({ case: 'stop', value: true } as const)
        : ({ case: 'awaitTermination', value: { timeoutMs: BigInt(action.await.timeoutMs) } } as const);
  return create(PlanSchema, {
    opType: {
      case: 'command',
      value: create(CommandSchema, {
        commandType: { case: 'streamingQueryCommand', value: { queryId: { id: query.id, runId: query.runId }, command: commandCase } },
      }),
    },
  });
}

export function relation(rel: Rel, opts: CompileOptions): Relation {
  const r = (x: Rel) => relation(x, opts);
  const e = (x: Expr) => expression(x, opts);
  switch (rel.kind) {
    case 'sql':
      return create(RelationSchema, { relType: { case: 'sql', value: { query: rel.query } } });
    case 'table':
      return create(RelationSchema, {
        relType: {
          case: 'read',
          value: { readType: { case: 'namedTable', value: { unparsedIdentifier: quoteName(rel.parts), options: options(rel.options, opts) } } },
        },
      });
    case 'source':
      return create(RelationSchema, {
        relType: {
          case: 'read',
          value: {
            readType: {
              case: 'dataSource',
              value: {
                format: rel.format,
                paths: [...rel.paths],
                options: options(rel.options, opts),
                ...(rel.schema === undefined ? {} : { schema: rel.schema }),
              },
            },
            isStreaming: rel.streaming === true,
          },
        },
      });
    case 'range':
      return create(RelationSchema, {
        relType: { case: 'range', value: { start: rel.start, end: rel.end, step: rel.step, ...(rel.partitions ? { numPartitions: rel.partitions } : {}) } },
      });
    case 'filter':
      return create(RelationSchema, { relType: { case: 'filter', value: { input: r(rel.input), condition: e(rel.condition) } } });
    case 'project':
      return create(RelationSchema, { relType: { case: 'project', value: { input: r(rel.input), expressions: rel.exprs.map(e) } } });
    case 'withColumns':
      return create(RelationSchema, {
        relType: { case: 'withColumns', value: { input: r(rel.input), aliases: rel.columns.map(([name, x]) => ({ expr: e(x), name: [name] })) } },
      });
    case 'drop':
      return create(RelationSchema, { relType: { case: 'drop', value: { input: r(rel.input), columnNames: [...rel.columns] } } });
    case 'deduplicate':
      return create(RelationSchema, {
        relType: {
          case: 'deduplicate',
          value: rel.columns ? { input: r(rel.input), columnNames: [...rel.columns] } : { input: r(rel.input), allColumnsAsKeys: true },
        },
      });
    case 'join':
      return create(RelationSchema, {
        relType: {
          case: 'join',
          value: {
            left: r(rel.left),
            right: r(rel.right),
            joinType: JOIN_TYPES[rel.type],
            ...(rel.on ? { joinCondition: e(rel.on) } : {}),
            ...(rel.using ? { usingColumns: [...rel.using] } : {}),
          },
        },
      });
    case 'union':
      return create(RelationSchema, {
        relType: {
          case: 'setOp',
          value: {
            leftInput: r(rel.left),
            rightInput: r(rel.right),
            setOpType: SetOperation_SetOpType.UNION,
            isAll: true,
            byName: true,
            allowMissingColumns: rel.allowMissing,
          },
        },
      });
    case 'aggregate':
      return create(RelationSchema, {
        relType: {
          case: 'aggregate',
          value: {
            input: r(rel.input),
            groupType: Aggregate_GroupType.GROUPBY,
            groupingExpressions: rel.groupBy.map(e),
            aggregateExpressions: rel.aggregates.map(e),
          },
        },
      });
    case 'sort':
      return create(RelationSchema, {
        relType: { case: 'sort', value: { input: r(rel.input), order: rel.orders.map((o) => sortOrder(o, opts)), isGlobal: true } },
      });
    case 'limit':
      return create(RelationSchema, { relType: { case: 'limit', value: { input: r(rel.input), limit: rel.n } } });
    case 'observe':
      return create(RelationSchema, { relType: { case: 'collectMetrics', value: { input: r(rel.input), name: rel.name, metrics: rel.metrics.map(e) } } });
    case 'alias':
      return create(RelationSchema, { relType: { case: 'subqueryAlias', value: { input: r(rel.input), alias: rel.name } } });
    case 'extension':
      return create(RelationSchema, { relType: { case: 'extension', value: extension(rel) } });
    case 'materialized':
      return create(RelationSchema, { relType: { case: 'cachedRemoteRelation', value: { relationId: opts.materialized?.get(rel.name) ?? rel.name } } });
    case 'tenantLogic': {
      const logic = create(TenantLogicSchema, { relation: r(rel.input), configPaths: [...rel.configPaths], jdbcSources: jdbcSources(rel.input) });
      return create(RelationSchema, { relType: { case: 'extension', value: anyPack(TenantLogicSchema, logic) } });
    }
  }
}

/** The plugin messages (src/spark/proto/lakehouse/jobs/plugins.proto), by their full names. */
const pluginMessages = createRegistry(file_lakehouse_jobs_plugins);

/**
 * A plugin's message as a google.protobuf.Any, encoded by the message's generated schema: the
 * extension's fields are set by their numbers (a repeated field once per value).
 */
export function extension(x: Extension): Any {
  const typeName = x.typeUrl.replace(/^.*\//, '');
  const schema: DescMessage | undefined = pluginMessages.getMessage(typeName);
  if (!schema) throw new Error(`no plugin message ${typeName} in plugins.proto`);
  const init: Record<string, unknown> = {};
  for (const f of x.fields) {
    const field = schema.fields.find((d) => d.number === f.field);
    if (!field || field.fieldKind === 'message' || field.fieldKind === 'map') throw new Error(`${typeName} has no string field ${f.field} (${f.name})`);
    if (field.fieldKind === 'list') ((init[field.localName] ??= []) as string[]).push(f.value);
    else init[field.localName] = f.value;
  }
  return anyPack(schema, create(schema, init));
}

/** Bind the session to the tenant it runs for (lakehouse.jobs.BindTenant): sent once, before any step. */
export function compileBindTenantCommand(b: TenantBinding): Plan {
  const l = b.limits;
  const message = create(BindTenantSchema, {
    tenant: b.tenant,
    readNamespaces: [...b.readNamespaces],
    writeNamespaces: [...b.writeNamespaces],
    readRoots: [...b.readRoots],
    writeRoots: [...b.writeRoots],
    kafka: b.kafka.map((k) => ({ bootstrapServers: [...k.bootstrapServers], topics: [...k.topics], topicPrefixes: [...k.topicPrefixes] })),
    limits: {
      valueChars: BigInt(l['value-chars']),
      valueFactor: BigInt(l['value-factor']),
      collectionElements: BigInt(l['collection-elements']),
      generatedRows: BigInt(l['generated-rows']),
      rowGrowth: BigInt(l['row-growth']),
      rowFloor: BigInt(l['row-floor']),
      stepSeconds: BigInt(l['step-seconds']),
      planNodes: BigInt(l['plan-nodes']),
    },
  });
  return create(PlanSchema, {
    opType: { case: 'command', value: create(CommandSchema, { commandType: { case: 'extension', value: anyPack(BindTenantSchema, message) } }) },
  });
}

export function expression(x: Expr, opts: CompileOptions): Expression {
  const e = (y: Expr) => expression(y, opts);
  switch (x.kind) {
    case 'col':
      return create(ExpressionSchema, { exprType: { case: 'unresolvedAttribute', value: { unparsedIdentifier: x.parts.map(quoteIdentifier).join('.') } } });
    case 'lit':
      return create(ExpressionSchema, { exprType: { case: 'literal', value: literal(x.value, opts) } });
    case 'fn':
      return create(ExpressionSchema, {
        exprType: { case: 'unresolvedFunction', value: { functionName: x.name, arguments: x.args.map(e), isDistinct: x.distinct ?? false } },
      });
    case 'alias':
      return create(ExpressionSchema, { exprType: { case: 'alias', value: { expr: e(x.expr), name: [x.name] } } });
    case 'cast':
      return create(ExpressionSchema, {
        exprType: {
          case: 'cast',
          value: { expr: e(x.expr), castToType: { case: 'typeStr', value: x.type }, ...(x.try ? { evalMode: Expression_Cast_EvalMode.TRY } : {}) },
        },
      });
    case 'star':
      return create(ExpressionSchema, {
        exprType: { case: 'unresolvedStar', value: x.qualifier === undefined ? {} : { unparsedTarget: `${quoteIdentifier(x.qualifier)}.*` } },
      });
    case 'window':
      return create(ExpressionSchema, {
        exprType: {
          case: 'window',
          value: { windowFunction: e(x.fn), partitionSpec: x.partitionBy.map(e), orderSpec: x.orderBy.map((o) => sortOrder(o, opts)) },
        },
      });
    case 'inBoundDates':
      return e(inBoundDates(x, opts));
  }
}

/** The bound dates as the expression the server gets: `IN` of DATE literals, TRUE for `*`, FALSE for none. */
function inBoundDates(x: Extract<Expr, { kind: 'inBoundDates' }>, opts: CompileOptions): Expr {
  const call = (name: string, ...args: Expr[]): Expr => ({ kind: 'fn', name, args });
  if (!opts.bound) return call('in', x.expr, { kind: 'lit', value: `<${x.bound}>` });
  const value = opts.bound.get(x.bound);
  if (value === undefined) throw new InternalError(`the run has no value for ${x.bound}, which a step it sends needs`);
  if (value === '*') return { kind: 'lit', value: true };
  const dates = JSON.parse(value) as unknown;
  if (!Array.isArray(dates) || !dates.every((d) => typeof d === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(d)))
    throw new InternalError(`${x.bound} is bound to ${value}, not a list of dates`);
  if (!dates.length) return { kind: 'lit', value: false };
  return call('in', x.expr, ...dates.map((date: string): Expr => ({ kind: 'lit', value: { date } })));
}

function sortOrder(o: SortOrder, opts: CompileOptions): Expression_SortOrder {
  return create(ExpressionSchema, {
    exprType: {
      case: 'sortOrder',
      value: {
        child: expression(o.expr, opts),
        direction: o.descending ? Expression_SortOrder_SortDirection.DESCENDING : Expression_SortOrder_SortDirection.ASCENDING,
        nullOrdering: o.nullsFirst ? Expression_SortOrder_NullOrdering.SORT_NULLS_FIRST : Expression_SortOrder_NullOrdering.SORT_NULLS_LAST,
      },
    },
  }).exprType.value as Expression_SortOrder;
}

export function literal(v: LiteralValue, opts: CompileOptions): Expression_Literal {
  const lt = (value: MessageInitShape<typeof Expression_LiteralSchema>['literalType']) => create(Expression_LiteralSchema, { literalType: value });
  if (v === null) return lt({ case: 'null', value: { kind: { case: 'null', value: {} } } });
  switch (typeof v) {
    case 'boolean':
      return lt({ case: 'boolean', value: v });
    case 'string':
      return lt({ case: 'string', value: v });
    case 'bigint':
      return lt({ case: 'long', value: v });
    case 'number':
      if (Number.isInteger(v) && v >= -(2 ** 31) && v < 2 ** 31) return lt({ case: 'integer', value: v });
      if (Number.isSafeInteger(v)) return lt({ case: 'long', value: BigInt(v) });
      return lt({ case: 'double', value: v });
  }
  if ('double' in v) return lt({ case: 'double', value: v.double });
  if ('decimal' in v) return lt({ case: 'decimal', value: { value: v.decimal, precision: v.precision, scale: v.scale } });
  if ('date' in v) return lt({ case: 'date', value: Math.round(Date.parse(`${v.date}T00:00:00Z`) / DAY_MS) });
  if ('timestamp' in v) return lt({ case: 'timestamp', value: v.timestamp.micros });
  return lt({ case: 'string', value: opts.reveal ? v.secret.reveal() : redacted });
}

export function command(cmd: Cmd, opts: CompileOptions): Command {
  const r = (x: Rel) => relation(x, opts);
  const e = (x: Expr) => expression(x, opts);
  switch (cmd.kind) {
    case 'sqlCommand':
      return create(CommandSchema, {
        commandType: { case: 'sqlCommand', value: { input: r({ kind: 'sql', query: cmd.query, reads: cmd.reads }) } },
      });
    case 'write':
      return create(CommandSchema, {
        commandType: {
          case: 'writeOperation',
          value: {
            input: r(cmd.input),
            source: cmd.format,
            mode: SAVE_MODES[cmd.mode],
            partitioningColumns: [...cmd.partitionBy],
            options: options(cmd.options, opts),
            saveType:
              cmd.path !== undefined ? { case: 'path', value: cmd.path } : { case: 'table', value: { tableName: quoteName(cmd.table ?? []), saveMethod: 1 } },
          },
        },
      });
    case 'writeV2':
      return create(CommandSchema, {
        commandType: {
          case: 'writeOperationV2',
          value: {
            input: r(cmd.input),
            tableName: quoteName(cmd.table),
            mode: V2_MODES[cmd.mode],
            partitioningColumns: cmd.partitionBy.map(e),
            tableProperties: { ...cmd.properties },
            options: { ...cmd.options },
            ...(cmd.provider === undefined ? {} : { provider: cmd.provider }),
            ...(cmd.overwriteCondition === undefined ? {} : { overwriteCondition: e(cmd.overwriteCondition) }),
          },
        },
      });
    case 'merge': {
      const action = (a: MergeAction) => mergeAction(a, opts);
      return create(CommandSchema, {
        commandType: {
          case: 'mergeIntoTableCommand',
          value: {
            targetTableName: quoteName(cmd.target),
            sourceTablePlan: r(cmd.source),
            mergeCondition: e(cmd.on),
            matchActions: cmd.whenMatched.map(action),
            notMatchedActions: cmd.whenNotMatched.map(action),
            notMatchedBySourceActions: cmd.whenNotMatchedBySource.map(action),
            withSchemaEvolution: cmd.schemaEvolution,
          },
        },
      });
    }
    case 'createView':
      return create(CommandSchema, {
        commandType: { case: 'createDataframeView', value: { input: r(cmd.input), name: cmd.name, replace: cmd.replace, isGlobal: false } },
      });
    case 'extension':
      return create(CommandSchema, { commandType: { case: 'extension', value: extension(cmd) } });
    case 'writeStream':
      return create(CommandSchema, {
        commandType: {
          case: 'writeStreamOperationStart',
          value: {
            input: r(cmd.input),
            options: { ...cmd.options },
            trigger: { case: 'availableNow', value: true },
            outputMode: cmd.outputMode,
            ...(cmd.queryName === undefined ? {} : { queryName: cmd.queryName }),
            ...(cmd.format === undefined ? {} : { format: cmd.format }),
            sinkDestination: { case: 'tableName', value: quoteName(cmd.table) },
          },
        },
      });
  }
}

function mergeAction(a: MergeAction, opts: CompileOptions): Expression {
  const e = (x: Expr) => expression(x, opts);
  const assignments = (pairs: readonly (readonly [string, Expr])[]) => pairs.map(([k, v]) => ({ key: e({ kind: 'col', parts: [k] }), value: e(v) }));
  const types = {
    delete: MergeAction_ActionType.DELETE,
    update: MergeAction_ActionType.UPDATE,
    updateAll: MergeAction_ActionType.UPDATE_STAR,
    insert: MergeAction_ActionType.INSERT,
    insertAll: MergeAction_ActionType.INSERT_STAR,
  } as const;
  return create(ExpressionSchema, {
    exprType: {
      case: 'mergeAction',
      value: {
        actionType: types[a.action],
        ...(a.condition ? { condition: e(a.condition) } : {}),
        assignments: a.action === 'update' ? assignments(a.set) : a.action === 'insert' ? assignments(a.values) : [],
      },
    },
  });
}

function options(o: Readonly<Record<string, OptionValue>>, opts: CompileOptions): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(o)) {
    if (typeof v === 'string') out[k] = v;
    else if ('secret' in v) out[k] = opts.reveal ? v.secret.reveal() : redacted;
    else if (!opts.bound) out[k] = `<${v.bound}>`;
    else if (opts.bound.has(v.bound)) out[k] = opts.bound.get(v.bound)!;
  }
  return out;
}

const JOIN_TYPES = {
  inner: Join_JoinType.INNER,
  left: Join_JoinType.LEFT_OUTER,
  right: Join_JoinType.RIGHT_OUTER,
  full: Join_JoinType.FULL_OUTER,
  left_semi: Join_JoinType.LEFT_SEMI,
  left_anti: Join_JoinType.LEFT_ANTI,
  cross: Join_JoinType.CROSS,
} as const;

const SAVE_MODES = {
  append: WriteOperation_SaveMode.APPEND,
  overwrite: WriteOperation_SaveMode.OVERWRITE,
  error: WriteOperation_SaveMode.ERROR_IF_EXISTS,
  ignore: WriteOperation_SaveMode.IGNORE,
} as const;

const V2_MODES = {
  create: WriteOperationV2_Mode.CREATE,
  create_or_replace: WriteOperationV2_Mode.CREATE_OR_REPLACE,
  replace: WriteOperationV2_Mode.REPLACE,
  append: WriteOperationV2_Mode.APPEND,
  overwrite: WriteOperationV2_Mode.OVERWRITE,
  overwrite_partitions: WriteOperationV2_Mode.OVERWRITE_PARTITIONS,
} as const;
