/* The embedding (Megatron-core's LanguageModelEmbedding): vocab-parallel word embeddings (this
 * rank's vocabulary rows; a token outside them looks up zeros), summed over tp by the
 * row-parallel mapping, plus learned absolute position embeddings, then dropout. */
#include "model/block.h"

void mc_embedding_params(mc_gpt_t *m, bool shared)
{
    const mc_gpt_config_t *c = &m->cfg;
    mc_param_t *w = mc_gpt_add_param(m, MC_PK_WORD_EMBEDDINGS, -1, c->vocab, c->hidden,
                                     c->embedding_init_std, 0);
    w->shared_embedding = shared;
    w->embedding_or_output = true;
    if (c->pos == MC_POS_LEARNED)
        mc_gpt_add_param(m, MC_PK_POSITION_EMBEDDINGS, -1, c->max_pos, c->hidden,
                         c->embedding_init_std, 0);
}

static mc_dropout_t embedding_dropout(const mc_gpt_t *m, const mc_gpt_slot_t *sl,
                                      uint32_t iteration, float p)
{
    return mc_gpt_dropout(m, iteration, 0, MC_DROPOUT_SITE_EMBEDDING, sl->sample0, p);
}

void mc_embedding_forward(mc_gpt_t *m, mc_gpt_slot_t *sl, uint32_t iteration, bool training)
{
    const mc_backend_t *be = m->be;
    const mc_gpt_config_t *c = &m->cfg;
    const mc_tp_dims_t t = mc_gpt_tp_dims(c);
    const mc_tp_t tp = mc_gpt_tp(m);
    const int S = c->seq, B = sl->batch, H = c->hidden;
    /* the lookup over the whole sequence, summed over tp into this rank's rows; the position
     * embedding joins once, before the sum */
    void *e = t.sp ? m->tmp_h : sl->in;
    be->embedding_forward(be, c->dt, e, sl->tokens, sl->positions, m->p.t[MC_PK_WORD_EMBEDDINGS],
                          c->tp_rank == 0 ? m->p.t[MC_PK_POSITION_EMBEDDINGS] : NULL, S, B, H,
                          t.vocab_start, t.vocab);
    mc_tp_row_output(&tp, e, sl->in, (long)t.seq * B * H);
    /* MuP: the embeddings (in their type) times the embedding multiplier, before dropout */
    if (c->embedding_mult > 0 && c->embedding_mult != 1.0f)
        be->scale(be, c->dt, sl->in, c->embedding_mult, (long)t.seq * B * H);
    const mc_dropout_t d = embedding_dropout(m, sl, iteration, training ? c->hidden_dropout : 0);
    mc_gpt_seq_dropout(m, false, sl->in, sl->in, &d, B);
}

void mc_embedding_backward(mc_gpt_t *m, mc_gpt_slot_t *sl, uint32_t iteration)
{
    const mc_backend_t *be = m->be;
    const mc_gpt_config_t *c = &m->cfg;
    const mc_tp_dims_t t = mc_gpt_tp_dims(c);
    const mc_tp_t tp = mc_gpt_tp(m);
    const int S = c->seq, B = sl->batch, H = c->hidden;
    const mc_dropout_t d = embedding_dropout(m, sl, iteration, c->hidden_dropout);
    mc_gpt_seq_dropout(m, true, m->dres, m->dres, &d, B);
    if (c->embedding_mult > 0 && c->embedding_mult != 1.0f)
        be->scale(be, c->dt, m->dres, c->embedding_mult, (long)t.seq * B * H);
    be->embedding_backward(be, c->dt, c->gdt, m->g.t[MC_PK_WORD_EMBEDDINGS],
                           m->g.t[MC_PK_POSITION_EMBEDDINGS],
                           mc_tp_row_output_grad(&tp, m->dres, m->gath, (long)t.seq * B * H),
                           sl->tokens, sl->positions, S, B, H, t.vocab_start, t.vocab);
}
